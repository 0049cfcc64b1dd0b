/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One error idiom in product code (docs/hacking.md, "The error idiom"): a
 * function that can fail takes a pg_error, never a caller's text buffer and
 * its size. Reads every C and C++ file of the product folders below
 * PG_SOURCE_DIR (their test/ and fuzz/ folders and fuzz_*.c left out), with
 * comments and literals blanked, and fails on any parameter pair
 * `char *<error-ish name>, size_t ...` (msg, why, err, errbuf, ... and their
 * _suffixed forms): the `char *msg, size_t msg_size` idiom pg_error replaced.
 * A `const` or `unsigned char *msg` is a message being sent, not an error.
 */
#include <check.h>
#include <dirent.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static const char *const product_dirs[] = {"plugin",  "hooks",  "tools",   "cri",
                                           "webhook", "common", "include", NULL};

#define ERROR_BUFFER                                                                               \
    "[(,][[:space:]]*char[[:space:]]*\\*[[:space:]]*"                                              \
    "(msg|message|why|why_not|reason|err|error|errbuf|errmsg|errstr)(_[a-z]+)?"                    \
    "[[:space:]]*,[[:space:]]*size_t[[:space:]]"

/* Blanks comments and the insides of string and character literals, newlines kept. */
static void blank_comments_and_literals(char *s)
{
    for (char *p = s; *p;) {
        if (p[0] == '/' && p[1] == '*') {
            char *end = strstr(p + 2, "*/");
            char *stop = end ? end + 2 : p + strlen(p);
            for (; p < stop; p++)
                if (*p != '\n')
                    *p = ' ';
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                *p++ = ' ';
        } else if (*p == '"' || *p == '\'') {
            char quote = *p++;
            while (*p && *p != quote && *p != '\n') {
                if (*p == '\\' && p[1])
                    *p++ = ' ';
                *p++ = ' ';
            }
            if (*p == quote)
                p++;
        } else
            p++;
    }
}

static int line_of(const char *text, const char *at)
{
    int line = 1;
    for (const char *p = text; p < at; p++)
        line += *p == '\n';
    return line;
}

/* The error buffers in one file's text: their count, the first described in why. */
static int error_buffers_in(const char *name, char *text, char *why, size_t why_len)
{
    regex_t re;
    ck_assert_int_eq(regcomp(&re, ERROR_BUFFER, REG_EXTENDED), 0);
    blank_comments_and_literals(text);
    int found = 0;
    regmatch_t m;
    for (const char *p = text; regexec(&re, p, 1, &m, 0) == 0; p += m.rm_eo) {
        if (found++)
            continue;
        const char *at = strstr(p + m.rm_so, "char"), *end = p + m.rm_eo - 1;
        size_t n = (size_t)snprintf(why, why_len, "%s:%d: ", name, line_of(text, at));
        for (; at < end && n + 1 < why_len; at++) /* one line: blanks folded */
            if (!(at[0] == ' ' || at[0] == '\n') || !(at[1] == ' ' || at[1] == '\n'))
                why[n++] = *at == '\n' ? ' ' : *at;
        why[n] = '\0';
    }
    regfree(&re);
    return found;
}

static bool is_source(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, "fuzz_", 5) != 0 &&
           ((n > 2 && (!strcmp(name + n - 2, ".c") || !strcmp(name + n - 2, ".h"))) ||
            (n > 3 && !strcmp(name + n - 3, ".cc")));
}

/* Every source file below dir (test/ and fuzz/ left out): the error buffers found, the
 * files read added to *files, every offender printed and the first kept in why. */
static int scan_dir(const char *dir, size_t *files, char *why, size_t why_len)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot list %s", dir);
    int found = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "test") || !strcmp(e->d_name, "fuzz"))
            continue;
        char *path = tu_sprintf("%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            found += scan_dir(path, files, why, why_len);
        else if (S_ISREG(st.st_mode) && is_source(e->d_name)) {
            char *text = tu_read_file(path, NULL), first[512] = "";
            ck_assert_msg(text != NULL, "read %s", path);
            int here = error_buffers_in(path, text, first, sizeof first);
            if (here)
                fprintf(stderr, "%s (and %d more in the file)\n", first, here - 1);
            if (here && !found)
                snprintf(why, why_len, "%s", first);
            found += here;
            (*files)++;
            free(text);
        }
        free(path);
    }
    closedir(d);
    return found;
}

START_TEST(product_code_passes_no_error_buffers)
{
    const char *src = getenv("PG_SOURCE_DIR");
    ck_assert_msg(src != NULL, "PG_SOURCE_DIR not set");
    size_t files = 0;
    int found = 0;
    char why[600] = "";
    for (const char *const *dir = product_dirs; *dir; dir++) {
        char *path = tu_sprintf("%s/%s", src, *dir);
        found += scan_dir(path, &files, why, sizeof why);
        free(path);
    }
    ck_assert_uint_ge(files, 150); /* the product's files were read */
    ck_assert_msg(found == 0,
                  "%d error buffers in function signatures, first %s: take a "
                  "pg_error (docs/hacking.md)",
                  found, why);
}
END_TEST

/* The check can fail: the old idiom is caught in any spelling, and only that. */
START_TEST(an_error_buffer_is_caught)
{
    static const struct {
        const char *text;
        int found;
    } cases[] = {
        {"int f(const char *path, char *msg, size_t msg_size);", 1},
        {"static int g(int a,\n    char *why,\n    size_t why_n) { return a; }", 1},
        {"extern \"C\" char *h(const char *t, size_t len, char *errbuf, size_t errlen);", 1},
        {"typedef int (*fn)(char* err, size_t n);", 1},
        {"int send(const unsigned char *msg, size_t len);", 0},
        {"int mac(const char *message, size_t len);", 0},
        {"void text(char *out, size_t n);", 0},
        {"/* was: int f(char *msg, size_t msg_size); */ int f(pg_error *err);", 0},
        {"const char *s = \"(char *why, size_t n)\";", 0},
        {"int f(pg_error *err); // (char *msg, size_t n)", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = strdup(cases[i].text), why[600] = "";
        ck_assert_msg(error_buffers_in("case", text, why, sizeof why) == cases[i].found, "%s",
                      cases[i].text);
        free(text);
    }
    /* The walk finds a file two folders down, and leaves test/ and fuzz/ alone. */
    char *dir = tu_mkdtemp();
    char *sub = tu_sprintf("%s/a", dir), *deeper = tu_sprintf("%s/a/b", dir),
         *tests = tu_sprintf("%s/test", dir);
    ck_assert_int_eq(mkdir(sub, 0700) | mkdir(deeper, 0700) | mkdir(tests, 0700), 0);
    char *bad = tu_sprintf("%s/x.c", deeper), *ignored = tu_sprintf("%s/t.c", tests),
         *fuzz = tu_sprintf("%s/fuzz_x.c", sub);
    tu_write_file(bad, "int f(char *msg, size_t size);\n", -1, 0600);
    tu_write_file(ignored, "int f(char *msg, size_t size);\n", -1, 0600);
    tu_write_file(fuzz, "int f(char *msg, size_t size);\n", -1, 0600);
    size_t files = 0;
    char why[600] = "";
    ck_assert_int_eq(scan_dir(dir, &files, why, sizeof why), 1);
    ck_assert_uint_eq(files, 1);
    ck_assert_msg(strstr(why, "/a/b/x.c:1: char *msg, size_t") != NULL, "%s", why);
    char *wrapped = strdup("int g(int a,\n    char *why,\n    size_t n);");
    ck_assert_int_eq(error_buffers_in("w.c", wrapped, why, sizeof why), 1);
    ck_assert_str_eq(why, "w.c:2: char *why, size_t");
    free(wrapped);
    tu_rmrf(dir);
    free(bad), free(ignored), free(fuzz), free(sub), free(deeper), free(tests), free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("error_idiom");
    TCase *tc = tcase_create("error_idiom");
    tcase_add_test(tc, product_code_passes_no_error_buffers);
    tcase_add_test(tc, an_error_buffer_is_caught);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
