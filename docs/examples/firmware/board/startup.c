/* Vector table and reset for a bare Cortex-M: copy .data, zero .bss, paint the stack (to
 * measure its use), enable the FPU where there is one, run main, exit through semihosting. */
#include <stdint.h>
#include "semihost.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack, _sstack;
int main(void);

#define STACK_PAINT 0xA5A5A5A5u

void Reset_Handler(void)
{
    uint32_t *src = &_sidata, *dst;
    for (dst = &_sdata; dst < &_edata;) *dst++ = *src++;
    for (dst = &_sbss; dst < &_ebss;) *dst++ = 0;
    {
        uint32_t *here = (uint32_t *)__builtin_frame_address(0) - 64;
        for (dst = &_sstack; dst < here;) *dst++ = STACK_PAINT;
    }
#if defined(__ARM_FP)
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10, CP11 full access */
    __asm__ volatile("dsb\n isb");
#endif
    sh_exit(main());
}

/* Bytes of stack ever used: the painted words overwritten since reset. */
uint32_t stack_used(void)
{
    const uint32_t *p = &_sstack;
    while (p < &_estack && *p == STACK_PAINT) p++;
    return (uint32_t)((const char *)&_estack - (const char *)p);
}

static void Fault_Handler(void)
{
    sh_puts("fault\n");
    sh_exit(3);
}

__attribute__((section(".vectors"), used))
static void (*const vectors[16])(void) = {
    (void (*)(void))&_estack, Reset_Handler, Fault_Handler, Fault_Handler, Fault_Handler,
    Fault_Handler, Fault_Handler, 0, 0, 0, 0, Fault_Handler, 0, 0, Fault_Handler,
    Fault_Handler,
};
