// SPDX-License-Identifier: Apache-2.0
// One key of a CRI-O configuration file (TOML), for crio_auth.c: Debian 12 packages no C
// TOML parser, so toml++ (libtomlplusplus3, as pullgate-doctor uses it) reads the file and this
// shim hands back the one string asked for. No exception crosses into C.
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <toml++/toml.h>

#include "crio_toml.h"

extern "C" {
#include "internal.h"
}

namespace {

int invalid(pg_error *err, const std::string &what)
{
    return pg_fail(err, PG_ERR_INVALID, "%s", what.c_str());
}

} // namespace

extern "C" int cri_toml_string_at(const char *text, size_t len, const char *table,
                                  const char *subtable, const char *key, char **value,
                                  pg_error *err)
{
    *value = nullptr;
    try {
        toml::table root = toml::parse(std::string_view(text, len));
        const toml::node *at = root.get(table);
        if (at && !at->is_table())
            return invalid(err, std::string("[") + table + "] is not a table");
        at = at ? at->as_table()->get(subtable) : nullptr;
        if (at && !at->is_table())
            return invalid(err, std::string("[") + table + "." + subtable + "] is not a table");
        at = at ? at->as_table()->get(key) : nullptr;
        if (!at)
            return PG_OK;
        const toml::value<std::string> *s = at->as_string();
        if (!s)
            return invalid(err, std::string(key) + " is not a string");
        const std::string &v = s->get();
        if (v.find('\0') != std::string::npos)
            return invalid(err, std::string(key) + " holds a NUL");
        char *copy = static_cast<char *>(std::malloc(v.size() + 1));
        if (!copy)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        std::memcpy(copy, v.c_str(), v.size() + 1);
        *value = copy;
        return PG_OK;
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
