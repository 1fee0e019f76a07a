/*
 * report_junit.c — tfdiff --junit FILE: the report as JUnit XML for CI
 * systems, a test case per rank and per class of finding.
 */
#include "core_out.h"
#include "report_internal.h"

#include <stdio.h>
#include <string.h>

static void xml_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* The report a failing case points to: the HTML report, else the Markdown
 * summary when it went to a file. */
static const char *junit_attachment(const diff_report *r)
{
    if (r->html)
        return r->html;
    return r->markdown && strcmp(r->markdown, "-") ? r->markdown : NULL;
}

/* One case; a failing one carries its sentence as the failure message (and
 * its text), and the attachment as a property and as the [[ATTACHMENT|..]]
 * line Jenkins' JUnit Attachments plugin and GitLab read in system-out. */
static void junit_case(FILE *f, const char *name, const char *failure, const char *attach)
{
    fputs("    <testcase classname=\"tfdiff\" name=\"", f);
    xml_escaped(f, name);
    if (!failure) {
        fputs("\"/>\n", f);
        return;
    }
    fputs("\">\n", f);
    if (attach) {
        fputs("      <properties>\n        <property name=\"attachment\" value=\"", f);
        xml_escaped(f, attach);
        fputs("\"/>\n      </properties>\n", f);
    }
    fputs("      <failure message=\"", f);
    xml_escaped(f, failure);
    fputs("\" type=\"tfdiff\">", f);
    xml_escaped(f, failure);
    fputs("</failure>\n", f);
    if (attach) {
        fputs("      <system-out>[[ATTACHMENT|", f);
        xml_escaped(f, attach);
        fputs("]]</system-out>\n", f);
    }
    fputs("    </testcase>\n", f);
}

/* The suite's counts: a case per rank and per class of finding. */
static void junit_counts(const diff_report *r, int *cases, int *failures)
{
    char msg[1024];
    const compare_nonfinite *nf = report_first_nonfinite(r);
    *cases = r->nranks + 4 + r->bad_unrecorded;
    *failures = r->bad_unrecorded + (report_sentence_incomplete(r, 0, msg, sizeof(msg)) != NULL) + (r->nleaks > 0) +
                (r->ndesyncs > 0) + (nf && !nf->in_golden);
    for (int i = 0; i < r->nranks; i++)
        *failures += report_sentence_rank(&r->ranks[i], msg, sizeof(msg)) != NULL;
}

int report_junit(const diff_report *r, const char *path)
{
    core_out out;
    if (core_out_open(&out, path, 0) < 0)
        return -1;
    FILE *f = out.f;
    const char *att = junit_attachment(r);
    int failures, cases;
    junit_counts(r, &cases, &failures);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"tfdiff\" tests=\"%d\" "
               "failures=\"%d\">\n", cases, failures);
    if (att) {
        fputs("    <properties>\n      <property name=\"attachment\" value=\"", f);
        xml_escaped(f, att);
        fputs("\"/>\n    </properties>\n", f);
    }
    char name[64], msg[1024];
    for (int i = 0; i < r->nranks; i++) {
        snprintf(name, sizeof(name), "rank %d divergence", r->ranks[i].rank);
        junit_case(f, name, report_sentence_rank(&r->ranks[i], msg, sizeof(msg)), att);
    }
    if (r->bad_unrecorded)
        junit_case(f, "BAD recorded", report_sentence_unrecorded(r, msg, sizeof(msg)), att);
    const compare_nonfinite *nf = report_first_nonfinite(r);
    junit_case(f, "non-finite", nf && !nf->in_golden ? report_sentence_nonfinite(nf, msg, sizeof(msg)) : NULL, att);
    junit_case(f, "leaks", r->nleaks ? report_sentence_leak(&r->leaks[0], msg, sizeof(msg)) : NULL, att);
    junit_case(f, "desync", r->ndesyncs ? report_sentence_desync(r->desyncs, r->ndesyncs, 0, msg, sizeof(msg)) : NULL,
               att);
    junit_case(f, "complete", report_sentence_incomplete(r, 0, msg, sizeof(msg)), att);
    fputs("  </testsuite>\n</testsuites>\n", f);
    return core_out_commit(&out);
}
