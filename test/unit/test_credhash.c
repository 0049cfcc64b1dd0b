/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of credhash.c (credentialHash), keyring.c (the dockerconfigjson keyring) and gocompat.c. */
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- helpers */

static void hash_of(const char *u, const char *p, const char *e, char out[PG_HASH_HEX_LEN + 1])
{
    pg_error err = {0};
    ck_assert_msg(pg_credential_hash(u, p, e, out, &err) == PG_OK, "%s", err.message);
}

/* The hash must be SHA-256 of exactly these Go json.Marshal bytes. */
static void expect_json(const char *u, const char *p, const char *e, const char *go_json)
{
    char got[PG_HASH_HEX_LEN + 1], want[PG_HASH_HEX_LEN + 1];
    hash_of(u, p, e, got);
    ck_assert_int_eq(pg_sha256_hex(go_json, strlen(go_json), want, NULL), PG_OK);
    ck_assert_msg(strcmp(got, want) == 0, "hash of %s differs", go_json);
}

static char *b64(const void *data, size_t n, int padded)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    ck_assert_ptr_nonnull(out);
    int len = EVP_EncodeBlock((unsigned char *)out, data, (int)n);
    ck_assert_int_ge(len, 0);
    out[len] = '\0';
    if (!padded)
        while (len > 0 && out[len - 1] == '=')
            out[--len] = '\0';
    return out;
}

/* Decodes a padded standard base64 value of the vector file. */
static char *unb64(const char *s, size_t *n)
{
    size_t len = strlen(s);
    unsigned char *out = malloc(len + 1);
    ck_assert_ptr_nonnull(out);
    int r = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
    ck_assert_int_ge(r, 0);
    size_t pad = len >= 2 && s[len - 1] == '=' ? (s[len - 2] == '=' ? 2 : 1) : 0;
    *n = (size_t)r - pad;
    out[*n] = '\0';
    return (char *)out;
}

/* Runs pg_dockerconfig_hashes, returning the vector (asserting success). */
static char **lookup(const char *json, const char *image)
{
    pg_error err = {0};
    char **v = NULL;
    int rc = pg_dockerconfig_hashes(json, strlen(json), image, &v, &err);
    ck_assert_msg(rc == PG_OK, "lookup %s in %s: %s", image, json, err.message);
    ck_assert_ptr_nonnull(v);
    return v;
}

static size_t strv_len(char **v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

/* Asserts the lookup returns exactly the hashes of users want[] (password "p"), in order. */
static void expect_users(const char *json, const char *image, const char *const *want)
{
    char **v = lookup(json, image);
    size_t n = 0;
    for (; want[n]; n++) {
        char h[PG_HASH_HEX_LEN + 1];
        hash_of(want[n], "p", NULL, h);
        ck_assert_msg(v[n] != NULL, "%s: only %zu hashes, want user %s", image, n, want[n]);
        ck_assert_msg(strcmp(v[n], h) == 0, "%s: hash %zu is not user %s", image, n, want[n]);
    }
    ck_assert_msg(v[n] == NULL, "%s: %zu hashes, want %zu", image, strv_len(v), n);
    pg_strv_free(v);
}

static void expect_fail(const char *json, size_t len, const char *image, int code)
{
    pg_error err = {0};
    char **v = (char **)1;
    int rc = pg_dockerconfig_hashes(json, len, image, &v, &err);
    ck_assert_msg(rc == code, "want code %d, got %d (%s) for %.200s", code, rc, err.message, json);
    ck_assert_int_eq(err.code, code);
    ck_assert_ptr_null(v);
}

#define USERS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE ((const char *const[]){NULL})

/* ------------------------------------------------- the shared vectors */

static json_t *load_vectors(void)
{
    char *path = tu_testdata("credential-hash-vectors.json");
    json_error_t je;
    json_t *v = json_load_file(path, 0, &je);
    ck_assert_msg(v && json_is_array(v), "%s: %s", path, je.text);
    ck_assert_int_gt(json_array_size(v), 0);
    free(path);
    return v;
}

static const char *vec_str(json_t *vec, const char *key)
{
    json_t *s = json_object_get(vec, key);
    return s ? json_string_value(s) : NULL;
}

START_TEST(test_vectors_direct)
{
    json_t *vectors = load_vectors();
    size_t i;
    json_t *vec;
    json_array_foreach(vectors, i, vec)
    {
        const char *name = vec_str(vec, "name"), *want = vec_str(vec, "credentialHash");
        const char *go_json = vec_str(vec, "go_json");
        char got[PG_HASH_HEX_LEN + 1], of_json[PG_HASH_HEX_LEN + 1];
        hash_of(vec_str(vec, "username"), vec_str(vec, "password"), vec_str(vec, "email"), got);
        ck_assert_msg(strcmp(got, want) == 0, "vector %s: got %s want %s", name, got, want);
        /* The vector's own bytes hash to its hash: our input is what Go marshalled. */
        pg_sha256_hex(go_json, strlen(go_json), of_json, NULL);
        ck_assert_msg(strcmp(of_json, want) == 0, "vector %s: go_json mismatch", name);
    }
    json_decref(vectors);
}
END_TEST

/* Each vector through a dockerconfigjson `auth`, padded and unpadded. */
START_TEST(test_vectors_via_auth)
{
    json_t *vectors = load_vectors();
    size_t i;
    json_t *vec;
    json_array_foreach(vectors, i, vec)
    {
        size_t ul, pl;
        char *u = unb64(vec_str(vec, "username_base64"), &ul);
        char *p = unb64(vec_str(vec, "password_base64"), &pl);
        char *pair = tu_sprintf("%s:%s", u, p);
        for (int padded = 0; padded < 2; padded++) {
            char *auth = b64(pair, strlen(pair), padded);
            json_t *doc = json_pack("{s:{s:{s:s,s:s}}}", "auths", "registry.example.com", "auth",
                                    auth, "email", vec_str(vec, "email") ? vec_str(vec, "email") : "");
            char *text = json_dumps(doc, 0);
            char **v = lookup(text, "registry.example.com/app");
            ck_assert_uint_eq(strv_len(v), 1);
            ck_assert_msg(strcmp(v[0], vec_str(vec, "credentialHash")) == 0, "vector %s via auth %s",
                          vec_str(vec, "name"), auth);
            pg_strv_free(v);
            free(text);
            json_decref(doc);
            free(auth);
        }
        free(pair);
        free(u);
        free(p);
    }
    json_decref(vectors);
}
END_TEST

/* ------------------------------------------------- Go's string escaping */

START_TEST(test_escaping)
{
    expect_json(NULL, NULL, NULL, "{}");
    expect_json("", "", "", "{}");
    expect_json("u", NULL, NULL, "{\"username\":\"u\"}");
    expect_json(NULL, NULL, "e@x", "{\"email\":\"e@x\"}");
    expect_json("u", "p", "e", "{\"username\":\"u\",\"password\":\"p\",\"email\":\"e\"}");
    expect_json("<>&", "'/", NULL, "{\"username\":\"\\u003c\\u003e\\u0026\",\"password\":\"'/\"}");
    /* Go >= 1.22 writes \b and \f short; other controls as \u00XX; DEL stays raw. */
    expect_json("\x01\b\f\n\r\t\x1f\x7f", NULL, NULL,
                "{\"username\":\"\\u0001\\b\\f\\n\\r\\t\\u001f\x7f\"}");
    expect_json("\"\\", NULL, NULL, "{\"username\":\"\\\"\\\\\"}");
    expect_json("a\xe2\x80\xa8" "b\xe2\x80\xa9", NULL, NULL, "{\"username\":\"a\\u2028b\\u2029\"}");
    /* Valid multibyte runes, including a literal U+FFFD, pass through raw. */
    expect_json("\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\xb3\xef\xbf\xbd", NULL, NULL,
                "{\"username\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\xb3\xef\xbf\xbd\"}");
}
END_TEST

START_TEST(test_invalid_utf8)
{
    /* One \ufffd per byte that does not start a valid sequence. */
    expect_json("a\xff" "b", NULL, NULL, "{\"username\":\"a\\ufffdb\"}");
    expect_json("\xe2\x82", NULL, NULL, "{\"username\":\"\\ufffd\\ufffd\"}");       /* truncated */
    expect_json("\xc0\xaf", NULL, NULL, "{\"username\":\"\\ufffd\\ufffd\"}");       /* overlong */
    expect_json("\xed\xa0\x80", NULL, NULL, "{\"username\":\"\\ufffd\\ufffd\\ufffd\"}"); /* surrogate */
    expect_json("\xf4\x90\x80\x80", NULL, NULL,
                "{\"username\":\"\\ufffd\\ufffd\\ufffd\\ufffd\"}");                /* > U+10FFFF */
    expect_json("\xe0\x80\x80", NULL, NULL, "{\"username\":\"\\ufffd\\ufffd\\ufffd\"}");
    expect_json("\xf0\x8f\xbf\xbf", NULL, NULL,
                "{\"username\":\"\\ufffd\\ufffd\\ufffd\\ufffd\"}");
    expect_json("\x80\xc3\xa9", NULL, NULL, "{\"username\":\"\\ufffd\xc3\xa9\"}");
}
END_TEST

START_TEST(test_hash_arguments)
{
    pg_error err = {0};
    ck_assert_int_eq(pg_credential_hash("u", "p", NULL, NULL, &err), PG_ERR_INVALID);
    size_t n = PG_MAX_DOCKERCONFIG_BYTES + 1;
    char *big = malloc(n + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', n);
    big[n] = '\0';
    char out[PG_HASH_HEX_LEN + 1];
    ck_assert_int_eq(pg_credential_hash(big, "p", NULL, out, &err), PG_ERR_LIMIT);
    free(big);
}
END_TEST

/* --------------------------------------------------------- matching */

/* Entries of user U with password "p" under location L: "L":{"username":"U","password":"p"} */
#define E(loc, user) "\"" loc "\":{\"username\":\"" user "\",\"password\":\"p\"}"

START_TEST(test_order_most_specific_first)
{
    const char *cfg = "{\"auths\":{" E("quay.io", "host") "," E("quay.io/coreos", "ns") ","
                      E("quay.io/coreos/etcd", "repo") "," E("*.quay.io", "glob") ","
                      E("quay.io/other", "other") "}}";
    expect_users(cfg, "quay.io/coreos/etcd:v3", USERS("repo", "ns", "host"));
    expect_users(cfg, "quay.io/coreos/etcd-operator", USERS("repo", "ns", "host"));
    expect_users(cfg, "quay.io/x/y", USERS("host"));
    expect_users(cfg, "sub.quay.io/x/y", USERS("glob"));
    expect_users(cfg, "gcr.io/x/y", NONE);
}
END_TEST

START_TEST(test_globs)
{
    const char *cfg = "{\"auths\":{" E("*.example.com", "star") "," E("reg.example.com", "exact") ","
                      E("r?g.example.com", "q") "," E("r[a-e]g.example.com", "class") ","
                      E("r[^e]g.example.com", "neg") "," E("reg.*", "tld") ","
                      E("*.*.example.com", "deep") "," E("r[.example.com", "bad") ","
                      E("[a-r]eg.example.com", "lead") "}}";
    /*
     * Reverse byte order of the keys: reg.example.com, reg.*, r[a-e]g, r[, *.example, *.*.
     * As in the kubelet, "r?g.example.com" url-parses as host "r" plus a query,
     * "[a-r]eg.example.com" as a bad IPv6 literal and "r[^e]g..." fails on the '^' that
     * url.Parse refuses in a host: none of them is ever a glob.
     */
    expect_users(cfg, "reg.example.com/app", USERS("exact", "class", "star"));
    expect_users(cfg, "rag.example.com/app", USERS("class", "star"));
    expect_users(cfg, "rzg.example.com/app", USERS("star"));
    expect_users(cfg, "peg.example.com/app", USERS("star"));
    expect_users(cfg, "reg.io/app", USERS("tld"));
    expect_users(cfg, "a.b.example.com/app", USERS("deep"));
    expect_users(cfg, "example.com/app", NONE);
}
END_TEST

START_TEST(test_ports)
{
    const char *cfg = "{\"auths\":{" E("reg.example.com:5000", "port") ","
                      E("reg.example.com", "noport") "," E("*.example.com:5000", "globport") "}}";
    expect_users(cfg, "reg.example.com:5000/app", USERS("port", "globport"));
    expect_users(cfg, "reg.example.com/app", USERS("noport"));
    expect_users(cfg, "reg.example.com:5001/app", NONE);
    expect_users(cfg, "localhost:5000/app", NONE);
}
END_TEST

START_TEST(test_paths_and_schemes)
{
    const char *cfg = "{\"auths\":{" E("https://reg.example.com/v2/", "v2") ","
                      E("http://reg.example.com/team", "team") ","
                      E("reg.example.com/v1/other", "other") "}}";
    /* The key path is a plain string prefix of the image path, as in the kubelet. */
    expect_users(cfg, "reg.example.com/team/app", USERS("team", "v2"));
    expect_users(cfg, "reg.example.com/teamx/app", USERS("team", "v2"));
    expect_users(cfg, "reg.example.com/other/app", USERS("other", "v2"));
    expect_users(cfg, "reg.example.com/app", USERS("v2"));
}
END_TEST

START_TEST(test_docker_hub)
{
    const char *hub = "{\"auths\":{" E("https://index.docker.io/v1/", "v1") ","
                      E("index.docker.io", "plain") "," E("quay.io", "quay") "}}";
    expect_users(hub, "nginx", USERS("v1", "plain"));
    expect_users(hub, "nginx:1.25", USERS("v1", "plain"));
    expect_users(hub, "user/app", USERS("v1", "plain"));
    expect_users(hub, "docker.io/user/app", USERS("v1", "plain"));
    expect_users(hub, "index.docker.io/user/app", USERS("v1", "plain"));
    expect_users(hub, "quay.io/app", USERS("quay"));
    expect_users(hub, "localhost/app", USERS("v1", "plain")); /* kubelet quirk: no '.' or ':' */
    expect_users(hub, "localhost:5000/app", NONE);

    /* A docker.io key matches directly, and then the fallback is not used. */
    const char *both = "{\"auths\":{" E("index.docker.io", "legacy") "," E("docker.io", "new") "}}";
    expect_users(both, "nginx", USERS("new"));
    expect_users(both, "registry.example.com/app", NONE);
    const char *hub_path = "{\"auths\":{" E("docker.io/team", "team") "," E("index.docker.io", "legacy") "}}";
    expect_users(hub_path, "team/app", USERS("team"));
    expect_users(hub_path, "other/app", USERS("legacy"));
}
END_TEST

START_TEST(test_auth_override)
{
    char want[PG_HASH_HEX_LEN + 1];
    hash_of("ab", "c", "e@x", want);
    const char *auths[] = {"YWI6Yw==", "YWI6Yw", "YWI6\nYw==", "YWI6Yw==\n", "YW\r\nI6Yw"};
    for (size_t i = 0; i < sizeof auths / sizeof auths[0]; i++) {
        char *cfg = tu_sprintf("{\"auths\":{\"r.io\":{\"username\":\"x\",\"password\":\"y\","
                               "\"auth\":\"%s\",\"email\":\"e@x\"}}}",
                               i == 2 ? "YWI6\\nYw==" : i == 3 ? "YWI6Yw==\\n" : i == 4 ? "YW\\r\\nI6Yw" : auths[i]);
        char **v = lookup(cfg, "r.io/app");
        ck_assert_uint_eq(strv_len(v), 1);
        ck_assert_msg(strcmp(v[0], want) == 0, "auth %s", auths[i]);
        pg_strv_free(v);
        free(cfg);
    }
    /* Only the first ':' splits; an empty auth does not override. */
    hash_of("u", "p:q", NULL, want);
    char **v = lookup("{\"auths\":{\"r.io\":{\"auth\":\"dTpwOnE=\"}}}", "r.io/a");
    ck_assert_str_eq(v[0], want);
    pg_strv_free(v);
    hash_of("x", "y", NULL, want);
    v = lookup("{\"auths\":{\"r.io\":{\"username\":\"x\",\"password\":\"y\",\"auth\":\"\"}}}", "r.io/a");
    ck_assert_str_eq(v[0], want);
    pg_strv_free(v);
    /* A NUL byte inside auth is kept and escaped like Go does. */
    char *nul = b64("a\0b:c", 5, 1);
    char *cfg = tu_sprintf("{\"auths\":{\"r.io\":{\"auth\":\"%s\"}}}", nul);
    v = lookup(cfg, "r.io/a");
    const char *go = "{\"username\":\"a\\u0000b\",\"password\":\"c\"}";
    pg_sha256_hex(go, strlen(go), want, NULL);
    ck_assert_str_eq(v[0], want);
    pg_strv_free(v);
    free(cfg);
    free(nul);
}
END_TEST

START_TEST(test_bad_auth)
{
    const char *bad[] = {"YWI6Yw=",  "YWI6Y",   "YWI6Yw===", "YWI6Yw==YQ==", "YW!6Yw==",
                         "YWJj",     "=",       "YWI6Yw= =", " YWI6Yw==",    "YWI6Yw==x",
                         "YWI6Yw=a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *cfg = tu_sprintf("{\"auths\":{\"r.io\":{\"auth\":\"%s\"}}}", bad[i]);
        expect_fail(cfg, strlen(cfg), "r.io/a", PG_ERR_INVALID);
        free(cfg);
    }
}
END_TEST

START_TEST(test_formats)
{
    /* Legacy .dockercfg bare map, case-insensitive field names (Go), nulls. */
    expect_users("{" E("r.io", "legacy") "}", "r.io/a", USERS("legacy"));
    expect_users("{\"Auths\":{" E("r.io", "cased") "}}", "r.io/a", USERS("cased"));
    expect_users("{\"auths\":{\"r.io\":{\"USERNAME\":\"up\",\"Password\":\"p\"}}}", "r.io/a",
                 USERS("up"));
    expect_users("{\"auths\":{\"r.io\":{\"username\":\"last\",\"password\":\"p\",\"Username\":null}}}",
                 "r.io/a", USERS("last"));
    expect_users("{\"auths\":{" E("r.io", "h") "},\"HttpHeaders\":{\"User-Agent\":\"x\"},"
                 "\"credsStore\":\"desktop\"}",
                 "r.io/a", USERS("h"));
    expect_users("{\"auths\":null}", "r.io/a", NONE);
    expect_users("{}", "r.io/a", NONE);
    char **v = lookup("{\"auths\":{\"r.io\":null}}", "r.io/a");
    char want[PG_HASH_HEX_LEN + 1];
    hash_of(NULL, NULL, NULL, want);
    ck_assert_uint_eq(strv_len(v), 1);
    ck_assert_str_eq(v[0], want);
    pg_strv_free(v);
    /* Unknown fields of an entry are ignored. */
    expect_users("{\"auths\":{\"r.io\":{\"username\":\"i\",\"password\":\"p\",\"identitytoken\":\"t\"}}}",
                 "r.io/a", USERS("i"));
}
END_TEST

START_TEST(test_unparsable_locations_ignored)
{
    const char *cfg = "{\"auths\":{" E("r.io:abc", "badport") "," E("r .io", "space") ","
                      E("r.io/%zz", "badescape") "," E("r\\u0001.io", "ctl") ","
                      E("r.io/%00", "nul") "," E("[r.io", "bracket") "," E("r.io", "good") "}}";
    expect_users(cfg, "r.io/a", USERS("good"));
    /* userinfo and fragments are stripped like url.Parse does */
    expect_users("{\"auths\":{" E("user:pw@r.io#frag", "ui") "}}", "r.io/a", USERS("ui"));
}
END_TEST

START_TEST(test_hostile_documents)
{
    const char *image = "r.io/a";
    const char *docs[] = {
        "{\"auths\":{\"r.io\":{\"username\":\"u\"",            /* truncated */
        "[]",                                                  /* not an object */
        "\"auths\"",
        "{\"auths\":\"r.io\"}",                                /* auths not an object */
        "{\"auths\":[]}",
        "{\"auths\":{\"r.io\":\"u:p\"}}",                      /* entry not an object */
        "{\"auths\":{\"r.io\":{\"username\":5}}}",             /* wrong types */
        "{\"auths\":{\"r.io\":{\"password\":true}}}",
        "{\"auths\":{\"r.io\":{\"auth\":{}}}}",
        "{\"auths\":{\"r.io\":{\"email\":[]}}}",
        "{\"auths\":{},\"HttpHeaders\":[]}",
        "{\"auths\":{},\"HttpHeaders\":{\"a\":1}}",
        "{\"auths\":{\"r.io\":{}},\"auths\":{}}",              /* duplicate keys */
        "{\"auths\":{\"r.io\":{},\"r.io\":{}}}",
        "{\"auths\":{\"r.io\":{\"username\":\"a\",\"username\":\"b\"}}}",
        "{\"auths\":{},\"Auths\":{}}",                         /* Go would merge: refused */
        "{\"r.io\":\"x\"}",                                    /* legacy map, bad entry */
        "{\"auths\":{}} {}",                                   /* trailing data */
        "{\"auths\":{\"r.io\":{\"username\":\"\\ud800\"}}}",   /* lone surrogate */
        "{\"auths\":{\"r.io\":{\"username\":\"a\\u0000\"}}}",  /* NUL in a string */
        "",
        "null", /* Go would accept it as empty; the strict parser wants a container */
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        expect_fail(docs[i], strlen(docs[i]), image, PG_ERR_INVALID);
    /* invalid UTF-8 in the document itself */
    expect_fail("{\"auths\":{\"r.io\":{\"username\":\"\xff\"}}}", 33, image, PG_ERR_INVALID);
    /* an embedded NUL cuts nothing: the length given is what is parsed */
    expect_fail("{\"auths\":{}}\0{", 14, image, PG_ERR_INVALID);
}
END_TEST

START_TEST(test_bad_arguments)
{
    const char *ok = "{\"auths\":{}}";
    char **v = NULL;
    pg_error err = {0};
    expect_fail(ok, strlen(ok), "Not A Valid/Image", PG_ERR_INVALID);
    expect_fail(ok, strlen(ok), "", PG_ERR_INVALID);
    expect_fail(ok, (size_t)PG_MAX_DOCKERCONFIG_BYTES + 1, "r.io/a", PG_ERR_LIMIT);
    expect_fail(NULL, 0, "r.io/a", PG_ERR_INVALID);
    expect_fail(ok, strlen(ok), NULL, PG_ERR_INVALID);
    ck_assert_int_eq(pg_dockerconfig_hashes(ok, strlen(ok), "r.io/a", NULL, &err), PG_ERR_INVALID);
    /* err may be NULL */
    ck_assert_int_eq(pg_dockerconfig_hashes("[", 1, "r.io/a", &v, NULL), PG_ERR_INVALID);
    ck_assert_int_eq(pg_dockerconfig_hashes(ok, strlen(ok), "UPPER", &v, NULL), PG_ERR_INVALID);
    char *huge = malloc(PG_MAX_IMAGE_LEN + 2);
    ck_assert_ptr_nonnull(huge);
    memset(huge, 'a', PG_MAX_IMAGE_LEN + 1);
    huge[PG_MAX_IMAGE_LEN + 1] = '\0';
    expect_fail(ok, strlen(ok), huge, PG_ERR_LIMIT);
    free(huge);
}
END_TEST

/* Many entries: bounded time, every matching one returned in document order. */
START_TEST(test_many_entries)
{
    size_t n = 20000;
    char *doc = malloc(n * 64 + 64);
    ck_assert_ptr_nonnull(doc);
    char *w = doc + sprintf(doc, "{\"auths\":{");
    for (size_t i = 0; i < n; i++)
        w += sprintf(w, "%s\"%s%zu\":{\"username\":\"u%zu\",\"password\":\"p\"}", i ? "," : "",
                     i % 2 ? "r.io/x" : "https://r.io/v2/", i, i);
    strcpy(w, "}}");
    /* Even entries: key "r.io/<i>" (the /v2 prefix is dropped); odd ones "r.io/x<i>".
     * "r.io/x1/a" is matched by "r.io/x1" only; "r.io/1/a" by "r.io/1" only. */
    const char *const *want = USERS("u1");
    expect_users(doc, "r.io/x1/a", want);
    want = USERS("u19998");
    expect_users(doc, "r.io/19998/a", want);
    free(doc);
}
END_TEST

START_TEST(test_glob_pathological)
{
    /* A star-heavy pattern against a long label must not blow up. */
    char label[200], pattern[200];
    memset(label, 'a', 150);
    label[150] = '\0';
    strcpy(pattern, "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b");
    char *cfg = tu_sprintf("{\"auths\":{\"%s.io\":{\"username\":\"g\",\"password\":\"p\"}}}", pattern);
    char *image = tu_sprintf("%s.io/x", label);
    expect_users(cfg, image, NONE);
    free(cfg);
    free(image);
}
END_TEST

static Suite *credhash_suite(void)
{
    Suite *s = suite_create("credhash");
    TCase *h = tcase_create("hash");
    tcase_add_test(h, test_vectors_direct);
    tcase_add_test(h, test_vectors_via_auth);
    tcase_add_test(h, test_escaping);
    tcase_add_test(h, test_invalid_utf8);
    tcase_add_test(h, test_hash_arguments);
    suite_add_tcase(s, h);
    TCase *m = tcase_create("dockerconfig");
    tcase_add_test(m, test_order_most_specific_first);
    tcase_add_test(m, test_globs);
    tcase_add_test(m, test_ports);
    tcase_add_test(m, test_paths_and_schemes);
    tcase_add_test(m, test_docker_hub);
    tcase_add_test(m, test_auth_override);
    tcase_add_test(m, test_bad_auth);
    tcase_add_test(m, test_formats);
    tcase_add_test(m, test_unparsable_locations_ignored);
    tcase_add_test(m, test_hostile_documents);
    tcase_add_test(m, test_bad_arguments);
    tcase_add_test(m, test_many_entries);
    tcase_add_test(m, test_glob_pathological);
    suite_add_tcase(s, m);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(credhash_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
