"""The policy walk in C: today's device semantics (``edge.walk``, ``edge.runtime``,
``edge.escalation``) over the generated node functions and tables.

Start at the root and read its sensors (a failed root read leaves its scores untrusted: it may
only escalate); run the node's model once; take the first highest action score (a
single-action node needs none); when the move's node needs a sensor that failed, take the
best-ranked action still possible (ties keep listed order). ``stop`` answers with the first
argmax of the node's probabilities; ``escalate`` reads the HPC's unread sensors when the link
is up and returns the request (features and their mask, the local label and confidence).
Costs: each sensor read once (sensor order), the link when a request goes out, then the visited
nodes' evaluation costs, in double, as ``protocol.costs`` defines them.
"""

from __future__ import annotations

WALK_SOURCE = r"""
static int ae_finite(float v) { return (v - v) == 0.0f; }

/* Read the sensors in list[0..n) not read or failed yet; 1 when none failed. */
static int ae_read(const unsigned char *list, int n, int stop_at_failure,
                   adaptedge_read_fn read, void *ctx, float *x, adaptedge_decision *d)
{
    float v[ADAPTEDGE_MAX_SENSOR_WIDTH];
    int k, i, ok = 1;
    for (k = 0; k < n; k++) {
        int s = list[k], w = adaptedge_sensor_first[s + 1] - adaptedge_sensor_first[s], good;
        uint32_t bit = (uint32_t)1 << s;
        if ((d->sensors_read | d->sensors_failed) & bit) continue;
        good = read(ctx, s, v) == 0;
        for (i = 0; good && i < w; i++) good = ae_finite(v[i]);
        if (good) {
            for (i = 0; i < w; i++) x[adaptedge_sensor_columns[adaptedge_sensor_first[s] + i]] = v[i];
            d->sensors_read |= bit;
            d->read_order[d->n_read++] = (unsigned char)s;
            continue;
        }
        d->sensors_failed |= bit;
        ok = 0;
        if (stop_at_failure) break;
    }
    return ok;
}

/* The action taken at node n (index into its actions), or -1: nothing possible. */
static int ae_choose(const ae_node *n, const float *scores, uint32_t failed, int trusted)
{
    unsigned char used[ADAPTEDGE_MAX_ACTIONS];
    int r, i, best = 0;
    if (!trusted) return n->escalate;
    if (n->n_actions == 1) return ae_possible(n, 0, failed) ? 0 : -1;
    for (i = 0; i < n->n_actions; i++) used[i] = 0;
    for (r = 0; r < n->n_actions; r++) {
        best = -1;
        for (i = 0; i < n->n_actions; i++)
            if (!used[i] && (best < 0 || scores[i] > scores[best])) best = i;
        if (ae_possible(n, best, failed)) return best;
        used[best] = 1;
    }
    return -1;
}

/* Adds a cost row; AE_COST_USED says which columns are ever non-zero (the others stay 0.0,
 * so skipping them changes no sum and saves soft-float work). */
static void ae_add(adaptedge_cost *c, const double *row)
{
    if (AE_COST_USED & 1) c->scalar += row[0];
    if (AE_COST_USED & 2) c->energy_mj += row[1];
    if (AE_COST_USED & 4) c->latency_ms += row[2];
    if (AE_COST_USED & 8) c->money += row[3];
    if (AE_COST_USED & 16) c->bytes += (uint32_t)row[4];
}

static void ae_costs(adaptedge_decision *d, int sent)
{
    adaptedge_cost visits = {0.0, 0.0, 0.0, 0.0, 0};
    int s, k;
    d->cost = visits;
    for (s = 0; s < ADAPTEDGE_N_SENSORS; s++)
        if (d->sensors_read >> s & 1u) ae_add(&d->cost, ae_sensor_cost[s]);
    if (sent) ae_add(&d->cost, ae_link_cost);
    for (k = 0; k < d->n_nodes; k++)
        if (ae_nodes[d->nodes[k]].visit_cost) ae_add(&visits, ae_nodes[d->nodes[k]].visit_cost);
    if (AE_COST_USED & 1) d->cost.scalar += visits.scalar;
    if (AE_COST_USED & 2) d->cost.energy_mj += visits.energy_mj;
    if (AE_COST_USED & 4) d->cost.latency_ms += visits.latency_ms;
    if (AE_COST_USED & 8) d->cost.money += visits.money;
    if (AE_COST_USED & 16) d->cost.bytes += visits.bytes;
}

static void ae_answer(adaptedge_decision *d, const float *proba)
{
    int c, best = 0;
    for (c = 0; c < ADAPTEDGE_N_CLASSES; c++) {
        d->probabilities[c] = proba[c];
        if (proba[c] > proba[best]) best = c;
    }
    d->label = best;
    d->probability = proba[best];
}

static void ae_request(adaptedge_decision *d, const float *x)
{
    int s, i;
    for (i = 0; i < ADAPTEDGE_N_FEATURES; i++) d->features[i] = 0.0f;
    for (i = 0; i < (ADAPTEDGE_N_FEATURES + 7) / 8; i++) d->feature_mask[i] = 0;
    for (s = 0; s < ADAPTEDGE_N_SENSORS; s++) {
        if (!(d->sensors_read >> s & 1u)) continue;
        for (i = adaptedge_sensor_first[s]; i < adaptedge_sensor_first[s + 1]; i++) {
            int col = adaptedge_sensor_columns[i];
            d->features[col] = x[col];
            d->feature_mask[col / 8] |= (unsigned char)(1u << (col % 8));
        }
    }
}

int adaptedge_decide(adaptedge_read_fn read, void *ctx, int link_up, adaptedge_decision *d)
{
    float x[ADAPTEDGE_N_FEATURES], proba[ADAPTEDGE_N_CLASSES], scores[ADAPTEDGE_MAX_ACTIONS];
    int i, node = ADAPTEDGE_ROOT, act = -1, trusted, sent = 0;
    const ae_node *n;
    for (i = 0; i < ADAPTEDGE_N_FEATURES; i++) x[i] = 0.0f;
    d->sensors_read = d->sensors_failed = 0;
    d->n_read = d->n_nodes = 0;
    n = &ae_nodes[node];
    trusted = ae_read(n->sensors, n->n_sensors, 0, read, ctx, x, d);
    for (;;) {
        n = &ae_nodes[node];
        d->nodes[d->n_nodes++] = (unsigned char)node;
        n->model(x, proba, scores);
        for (;;) {
            const ae_node *next;
            act = ae_choose(n, scores, d->sensors_failed, trusted);
            if (act < 0 || n->kinds[act] != AE_MOVE) break;
            next = &ae_nodes[n->next[act]];
            if (ae_read(next->sensors, next->n_sensors, 1, read, ctx, x, d)) break;
        }
        if (act < 0 || n->kinds[act] != AE_MOVE) break;
        node = n->next[act];
    }
    ae_answer(d, proba);
    d->kind = act < 0 ? ADAPTEDGE_DEGRADED : n->kinds[act] == AE_STOP ? ADAPTEDGE_LABEL
              : ADAPTEDGE_ESCALATE;
    if (d->kind == ADAPTEDGE_ESCALATE) {
        if (link_up) {
            ae_read(ae_hpc_sensors, ADAPTEDGE_N_HPC_SENSORS, 0, read, ctx, x, d);
            sent = 1;
        }
        ae_request(d, x);
    }
    d->link_paid = sent;
    ae_costs(d, sent);
    return d->kind;
}
"""

POSSIBLE_SOURCE = r"""
/* Action a of node n is possible: not a move, or its node needs no sensor that failed. */
static int ae_possible(const ae_node *n, int a, uint32_t failed)
{
    return n->kinds[a] != AE_MOVE || !(ae_nodes[n->next[a]].bits & failed);
}
"""
