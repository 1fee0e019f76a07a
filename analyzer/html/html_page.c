/*
 * html_page.c — the head of the HTML reports
 * (html_page.h). The style is inline: the page references nothing outside
 * itself.
 */
#include "html_page.h"
#include "html_svg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char style[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:960px;color:#222;padding:0 1em}"
    "h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:1.6em}"
    "#verdict{font-size:1.05em;padding:.6em .8em;border-radius:4px;background:#eef5ee;border-left:6px solid #393}"
    "#verdict[data-status=diverged],#verdict[data-status=findings]{background:#fbeeee;border-color:#c33}"
    "#verdict[data-status=incomplete]{background:#fdf6e3;border-color:#c90}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}"
    "td.num{text-align:right;font-family:monospace}tr.hot td{background:#fde2e2}"
    "code{font-family:monospace;background:#f4f4f4;padding:0 2px}.meta{color:#555}"
    ".downsampled{color:#875;font-style:italic}figure.chart{margin:.4em 0}"
    "svg .plot{fill:#fafafa;stroke:#ccc}svg .ln{fill:none;stroke-width:1.5}"
    "svg .t{font-size:12px;font-weight:bold}svg .ax,svg .lg,svg .mk{font-size:10px}svg .ax{fill:#555}"
    "svg .divergence-mark{stroke:#c00;stroke-width:1.5;stroke-dasharray:3 2}svg .mk{fill:#c00}"
    "svg .same{fill:#fff;stroke:#ccc}svg .first-divergence{fill:none;stroke:#06c;stroke-width:2}"
    "svg .lanebg{fill:#fff}svg .lane.fault .lanebg{fill:#fde2e2}svg .bar{fill:#69c}"
    "svg .bar.open{fill:#e90}svg .bar.fault{fill:#c33}nav a{margin-right:1em}"
    "svg .grid line{stroke:#e8e8e8}svg .pts circle{fill:transparent}svg .pts circle:hover{fill:#000;fill-opacity:.4}"
    "svg .cbar{fill:none;stroke:#999}";

void html_page_head(FILE *f, const char *report, const char *title)
{
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\" data-tft-report=\"%s\">\n<head>\n<meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
               "img-src data:\">\n<title>",
            report);
    html_text(f, title);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n", style);
}

void html_page_tail(FILE *f)
{
    fputs("<p class=\"meta\">Written by tftrace; one self-contained page (inline SVG, no scripts, no network)."
          "</p>\n</body>\n</html>\n", f);
}

void html_page_section(FILE *f, const char *id, const char *title)
{
    fprintf(f, "<section id=\"%s\">\n<h2>", id);
    html_text(f, title);
    fputs("</h2>\n", f);
}
