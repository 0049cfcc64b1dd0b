// SPDX-License-Identifier: Apache-2.0
// pullgate-wire edits containerd's TOML as text, so that the administrator's comments and
// layout stay: toml++ parses the file and says where each table header, key and value is
// (line and column); wire_containerd.c then replaces or inserts lines there and re-parses
// the result to check that it means exactly what was intended.
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <toml++/toml.h>

extern "C" {
#include "internal.h"
}

namespace {

void set_error(pg_error *err, const std::string &what)
{
    pg_fail(err, PG_ERR_INVALID, "%s", what.c_str());
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

struct mapper {
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

    // Tables are entered (their keys listed); arrays, including arrays of tables, are not.
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

} // namespace

// [{"path":[...],"table":bool,"inline":bool,"kline","kcol","kend","line","col","eline","ecol"}]
// for every key of the document (1-based lines and columns; ecol/kend exclusive), as malloc'ed
// JSON text; NULL with err.
extern "C" char *pgw_toml_map(const char *text, size_t len, pg_error *err)
{
    try {
        toml::table table = toml::parse(std::string_view(text, len));
        mapper m;
        m.out << "[";
        m.walk(table, "");
        m.out << "]";
        std::string json = m.out.str();
        char *copy = static_cast<char *>(std::malloc(json.size() + 1));
        if (!copy) {
            pg_fail(err, PG_ERR_NOMEM, "out of memory");
            return nullptr;
        }
        std::memcpy(copy, json.data(), json.size() + 1);
        return copy;
    } catch (const toml::parse_error &e) {
        std::ostringstream msg;
        msg << "line " << e.source().begin.line << ": " << e.description();
        set_error(err, msg.str());
    } catch (const std::exception &e) {
        set_error(err, e.what());
    } catch (...) {
        set_error(err, "TOML parser failed");
    }
    return nullptr;
}
