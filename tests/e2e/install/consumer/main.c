/* Uses the installed headers and library as an outside project would. */
#include <tft.h>
#include <stdio.h>
int main(void)
{
    float x[4] = {1, 2, 3, 4};
    int64_t n = 4;
    int e = tft_tensor("x", TFT_F32, x, 1, &n);
    printf("tft_enabled=%d tft_tensor=%d format=%s\n", tft_enabled(), e, tft_format_version());
    return e;
}
