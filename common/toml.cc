// SPDX-License-Identifier: Apache-2.0
// TOML for the C side (pg_toml.h): Debian 12 packages no C TOML parser, so toml++
// (libtomlplusplus3) parses, here only. One parse per call and one place where toml++'s
// errors and exceptions become a pg_error: none crosses into C.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <toml++/toml.h>

#include "pg_toml.h"

extern "C" {
#include "internal.h"
}

namespace {

int invalid(pg_error *err, const std::string &what)
{
    return pg_fail(err, PG_ERR_INVALID, "%s", what.c_str());
}

// Parses text and hands its root table to use (which returns a pg_code); a parse error
// names its line; an exception, from toml++ or from use, fails the call.
template <typename Use> int with_root(const char *text, size_t len, pg_error *err, Use use)
{
    try {
        toml::table root = toml::parse(std::string_view(text, len));
        return use(root);
    } catch (const toml::parse_error &e) {
        std::ostringstream msg;
        msg << "line " << e.source().begin.line << ": " << e.description();
        return invalid(err, msg.str());
    } catch (const std::exception &e) {
        return invalid(err, e.what());
    } catch (...) {
        return invalid(err, "TOML parser failed");
    }
}

// s as a malloc'ed C string.
int copy_out(const std::string &s, char **out, pg_error *err)
{
    *out = static_cast<char *>(std::malloc(s.size() + 1));
    if (!*out)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    std::memcpy(*out, s.c_str(), s.size() + 1);
    return PG_OK;
}

// A JSON string, for keys (jansson reads the result).
std::string quoted(std::string_view s)
{
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

// pg_toml_key_places' list.
struct key_places {
    std::ostringstream out;
    bool first = true;

    void entry(const std::string &path, const toml::key &k, const toml::node &v)
    {
        const auto &ks = k.source();
        const auto &vs = v.source();
        out << (first ? "" : ",") << "{\"path\":[" << path << "],\"table\":"
            << (v.is_table() ? "true" : "false") << ",\"inline\":"
            << (v.is_table() && v.as_table()->is_inline() ? "true" : "false")
            << ",\"kline\":" << ks.begin.line << ",\"kcol\":" << ks.begin.column
            << ",\"kend\":" << ks.end.column << ",\"line\":" << vs.begin.line
            << ",\"col\":" << vs.begin.column << ",\"eline\":" << vs.end.line
            << ",\"ecol\":" << vs.end.column << "}";
        first = false;
    }

    void walk(const toml::table &t, const std::string &path)
    {
        for (auto &&[k, v] : t) {
            std::string p = path + (path.empty() ? "" : ",") + quoted(k.str());
            entry(p, k, v);
            if (v.is_table())
                walk(*v.as_table(), p);
        }
    }
};

// The table named name in t (NULL when absent); shown names it in the error.
int subtable(const toml::table *t, const char *name, const std::string &shown,
             const toml::table **out, pg_error *err)
{
    const toml::node *at = t ? t->get(name) : nullptr;
    if (at && !at->is_table())
        return invalid(err, "[" + shown + "] is not a table");
    *out = at ? at->as_table() : nullptr;
    return PG_OK;
}

} // namespace

extern "C" char *pg_toml_json_text(const char *text, size_t len, pg_error *err)
{
    char *json = nullptr;
    with_root(text, len, err, [&](const toml::table &root) {
        std::ostringstream out;
        out << toml::json_formatter{root};
        return copy_out(out.str(), &json, err);
    });
    return json;
}

extern "C" char *pg_toml_key_places(const char *text, size_t len, pg_error *err)
{
    char *json = nullptr;
    with_root(text, len, err, [&](const toml::table &root) {
        key_places places;
        places.out << "[";
        places.walk(root, "");
        places.out << "]";
        return copy_out(places.out.str(), &json, err);
    });
    return json;
}

extern "C" int pg_toml_string_at(const char *text, size_t len, const char *table,
                                 const char *sub, const char *key, char **value, pg_error *err)
{
    *value = nullptr;
    return with_root(text, len, err, [&](const toml::table &root) {
        const toml::table *t = nullptr, *s = nullptr;
        int rc = subtable(&root, table, table, &t, err);
        if (rc == PG_OK)
            rc = subtable(t, sub, std::string(table) + "." + sub, &s, err);
        const toml::node *at = rc == PG_OK && s ? s->get(key) : nullptr;
        if (!at)
            return rc;
        const toml::value<std::string> *v = at->as_string();
        if (!v)
            return invalid(err, std::string(key) + " is not a string");
        if (v->get().find('\0') != std::string::npos)
            return invalid(err, std::string(key) + " holds a NUL");
        return copy_out(v->get(), value, err);
    });
}
