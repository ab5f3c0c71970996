/* The arm app on the STM32F405: the board, then the app's boot and its control ticks forever. */
#include "arm_app.h"
#include "board.h"

int main(void)
{
    board_init();
    arm_app_boot();
    for (;;) {
        arm_app_tick();
    }
}
