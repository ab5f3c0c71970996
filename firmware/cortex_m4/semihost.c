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

/* One "key=value" line over semihosting, the value in decimal */
void semihost_print_uint(const char *key, uint64_t value)
{
    char text[64];
    int n = 0;
    while (key[n] != '\0' && n < 40) {
        text[n] = key[n];
        ++n;
    }
    text[n++] = '=';
    char digits[21];
    int d = 0;
    do {
        digits[d++] = (char)('0' + value % 10u);
        value /= 10u;
    } while (value != 0u);
    while (d > 0) {
        text[n++] = digits[--d];
    }
    text[n++] = '\n';
    text[n] = '\0';
    semihost_write(text);
}

__attribute__((noreturn)) void semihost_exit(int status)
{
    /* SYS_EXIT with ADP_Stopped_ApplicationExit (0x20026) exits 0; RunTimeErrorUnknown (0x20023) exits 1 */
    semihost_call(0x18, (const void *)(uintptr_t)(status == 0 ? 0x20026 : 0x20023));
    for (;;) {
    }
}
