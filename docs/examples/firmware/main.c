/* A firmware main for a Cortex-M board running an exported adaptedge policy.
 *
 * adaptedge_decide() asks for sensors through read_sensor() (only those the policy needs, in
 * its order) and either answers locally or returns an escalation request, which
 * send_escalation() hands to the transport. Here the sensors and the transport are stubs: the
 * sensors replay a few fixed readings and the transport prints the request through
 * semihosting, so the example runs under QEMU (make run). On a board, read your ADC/I2C/SPI
 * sensors in board_read() and send the request over your radio or UART in transport_send(). */
#include <stdint.h>
#include "adaptedge_policy.h"
#include "board/semihost.h"

/* --- board stubs: replace with the real sensor drivers and link ------------------------ */

static uint32_t demo_item; /* which demo reading the stub sensors return */

/* Fill values[0..adaptedge_sensor_width[sensor]) with one reading; 0 on success. */
static int board_read(int sensor, float *values)
{
    int i, width = adaptedge_sensor_width[sensor];
    for (i = 0; i < width; i++) /* a deterministic stand-in for a measurement */
        values[i] = (float)((demo_item * 7u + (uint32_t)sensor * 3u + (uint32_t)i) % 16u);
    return 0;
}

/* Send `len` bytes to the cloud; 0 when sent. */
static int transport_send(const unsigned char *bytes, int len)
{
    static const char hex[] = "0123456789abcdef";
    char line[2 * 128 + 2];
    int i, n = len < 128 ? len : 128;
    for (i = 0; i < n; i++) {
        line[2 * i] = hex[bytes[i] >> 4];
        line[2 * i + 1] = hex[bytes[i] & 15];
    }
    line[2 * n] = '\n';
    line[2 * n + 1] = 0;
    sh_puts("escalate ");
    sh_puts(line);
    return 0;
}

/* --- glue ------------------------------------------------------------------------------ */

static int read_sensor(void *ctx, int sensor, float *values)
{
    (void)ctx;
    return board_read(sensor, values);
}

/* The request on the wire: the feature mask, then the measured features (float32, little
 * endian), then the local label and its probability. Pick the encoding your cloud side
 * expects; adaptedge's own MQTT uplink uses protocol.messages.InferenceRequest. */
static int send_escalation(const adaptedge_decision *d)
{
    static unsigned char buf[sizeof d->feature_mask + 4 * ADAPTEDGE_N_FEATURES + 8];
    int i, n = 0;
    const unsigned char *p;
    for (i = 0; i < (int)sizeof d->feature_mask; i++) buf[n++] = d->feature_mask[i];
    for (i = 0; i < ADAPTEDGE_N_FEATURES; i++) {
        if (!(d->feature_mask[i / 8] >> (i % 8) & 1)) continue;
        p = (const unsigned char *)&d->features[i];
        buf[n++] = p[0]; buf[n++] = p[1]; buf[n++] = p[2]; buf[n++] = p[3];
    }
    buf[n++] = (unsigned char)d->label;
    p = (const unsigned char *)&d->probability;
    buf[n++] = p[0]; buf[n++] = p[1]; buf[n++] = p[2]; buf[n++] = p[3];
    return transport_send(buf, n);
}

int main(void)
{
    adaptedge_decision d;
    int link_up = 1; /* ask the transport whether it can send now */
    for (demo_item = 0; demo_item < 8; demo_item++) {
        adaptedge_decide(read_sensor, 0, link_up, &d);
        if (d.kind == ADAPTEDGE_ESCALATE && d.link_paid) {
            send_escalation(&d); /* then wait for the cloud's label, or use d.label */
        } else {
            sh_puts("local ");
            sh_puts(adaptedge_class_names[d.label]);
            sh_puts(d.kind == ADAPTEDGE_DEGRADED ? " (degraded)\n" : "\n");
        }
    }
    return 0;
}
