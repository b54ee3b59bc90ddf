/* Arm semihosting (the debugger or QEMU does the I/O): just enough for the examples. */
#ifndef SEMIHOST_H
#define SEMIHOST_H

#include <stdint.h>

int sh_open(const char *path, int mode);   /* mode 1: read binary, 5: write binary */
int sh_read(int fd, void *buf, int len);    /* bytes NOT read (0: all read) */
int sh_write(int fd, const void *buf, int len);
int sh_close(int fd);
void sh_puts(const char *text);             /* to the host's stdout */
void sh_exit(int status);

/* SysTick as a cycle counter: start it, then ticks elapsed between two reads. */
void ticks_start(void);
uint32_t ticks_now(void);
uint32_t ticks_between(uint32_t before, uint32_t after);

#endif
