/* Uses the installed headers and library as an outside project would.
 * Prints what it recorded and the versions: the header's (compiled in) and
 * the library's (at run time); run_install_test.sh compares them. */
#include <tft.h>
#include <stdio.h>
int main(void)
{
    float x[4] = {1, 2, 3, 4};
    int64_t n = 4;
    int e = tft_tensor("x", TFT_F32, x, 1, &n);
    printf("tft_enabled=%d tft_tensor=%d header=%d.%d.%d version=%s format=%s\n", tft_enabled(), e,
           TFT_VERSION_MAJOR, TFT_VERSION_MINOR, TFT_VERSION_PATCH, tft_version(), tft_format_version());
    return e;
}
