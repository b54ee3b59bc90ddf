/* Replays rows through an exported policy on a bare Cortex-M under QEMU (semihosting).
 * rows.bin: int32 n, int32 link_up, then n rows of ADAPTEDGE_N_FEATURES float32.
 * out.bin: per row the harness record (int32 ints[h_width()], double cost[5], float
 * probabilities[ADAPTEDGE_N_CLASSES], uint32 ticks), then uint32 calibration loop ticks,
 * uint32 calibration instructions, uint32 stack bytes used. */
#include <stdint.h>
#include "adaptedge_policy.h"
#include "semihost.h"

int h_width(void);
void h_decide(const float *row, int link_up, long *ints, double *cost, float *probs);
uint32_t stack_used(void);
extern unsigned long h_t0, h_t1;

#define CALIBRATION_LOOPS 100000u

static uint32_t calibrate(void)
{
    uint32_t t0 = ticks_now(), t1;
    register uint32_t n __asm__("r0") = CALIBRATION_LOOPS;
    __asm__ volatile(".syntax unified\n1: subs %0, %0, #1\n bne 1b" : "+r"(n) : : "cc");
    t1 = ticks_now();
    return ticks_between(t0, t1);
}

int main(void)
{
    static float row[ADAPTEDGE_N_FEATURES];
    static long ints[64];
    static double cost[5];
    static float probs[ADAPTEDGE_N_CLASSES];
    int32_t head[2];
    uint32_t t0, tail[3];
    int in = sh_open("rows.bin", 1), out = sh_open("out.bin", 5), r;
    if (in < 0 || out < 0 || h_width() > 64) return 1;
    if (sh_read(in, head, sizeof head)) return 1;
    ticks_start();
    for (r = 0; r < head[0]; r++) {
        if (sh_read(in, row, sizeof row)) return 1;
        h_decide(row, head[1], ints, cost, probs);
        t0 = ticks_between((uint32_t)h_t0, (uint32_t)h_t1);
        sh_write(out, ints, h_width() * (int)sizeof(long));
        sh_write(out, cost, sizeof cost);
        sh_write(out, probs, sizeof probs);
        sh_write(out, &t0, sizeof t0);
    }
    tail[0] = calibrate();
    tail[1] = 2u * CALIBRATION_LOOPS;
    tail[2] = stack_used();
    sh_write(out, tail, sizeof tail);
    sh_close(out);
    sh_close(in);
    return 0;
}
