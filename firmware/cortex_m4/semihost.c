/* ARM semihosting: text to the debugger (QEMU's stderr) and exit with a status. */
#include <stdint.h>

static int semihost_call(int op, const void *arg)
{
    register int r0 __asm("r0") = op;
    register const void *r1 __asm("r1") = arg;
    __asm volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void semihost_write(const char *text)
{
    semihost_call(0x04, text); /* SYS_WRITE0 */
}

__attribute__((noreturn)) void semihost_exit(int status)
{
    /* SYS_EXIT with ADP_Stopped_ApplicationExit (0x20026) exits 0; RunTimeErrorUnknown (0x20023) exits 1 */
    semihost_call(0x18, (const void *)(uintptr_t)(status == 0 ? 0x20026 : 0x20023));
    for (;;) {
    }
}
