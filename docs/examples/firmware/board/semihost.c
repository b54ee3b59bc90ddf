/* Arm semihosting calls (BKPT 0xAB on M-profile) and SysTick, no C library needed. */
#include "semihost.h"

static int sh_call(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static int sh_length(const char *s)
{
    int n = 0;
    while (s[n]) n++;
    return n;
}

int sh_open(const char *path, int mode)
{
    const void *args[3];
    args[0] = path; args[1] = (const void *)(uintptr_t)mode;
    args[2] = (const void *)(uintptr_t)sh_length(path);
    return sh_call(0x01, args);
}

int sh_read(int fd, void *buf, int len)
{
    const void *args[3];
    args[0] = (const void *)(uintptr_t)fd; args[1] = buf; args[2] = (const void *)(uintptr_t)len;
    return sh_call(0x06, args);
}

int sh_write(int fd, const void *buf, int len)
{
    const void *args[3];
    args[0] = (const void *)(uintptr_t)fd; args[1] = buf; args[2] = (const void *)(uintptr_t)len;
    return sh_call(0x05, args);
}

int sh_close(int fd)
{
    const void *args[1];
    args[0] = (const void *)(uintptr_t)fd;
    return sh_call(0x02, args);
}

void sh_puts(const char *text) { sh_call(0x04, text); }

void sh_exit(int status)
{
    /* SYS_EXIT with ADP_Stopped_ApplicationExit (QEMU exits 0) or RunTimeErrorUnknown (1) */
    sh_call(0x18, (const void *)(uintptr_t)(status ? 0x20024u : 0x20026u));
    for (;;) {}
}

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)

void ticks_start(void)
{
    SYST_RVR = 0x00FFFFFFu;
    SYST_CVR = 0;
    SYST_CSR = 5u; /* enabled, processor clock, no interrupt */
}

uint32_t ticks_now(void) { return SYST_CVR; }

uint32_t ticks_between(uint32_t before, uint32_t after)
{
    return (before - after) & 0x00FFFFFFu; /* counts down; one wrap at most */
}
