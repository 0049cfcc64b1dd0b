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

namespace {

void set_error(char *errbuf, size_t errlen, const std::string &what)
{
    if (errbuf && errlen)
        std::snprintf(errbuf, errlen, "%s", what.c_str());
}

} // namespace

extern "C" int cri_toml_string_at(const char *text, size_t len, const char *table,
                                  const char *subtable, const char *key, char **value,
                                  char *errbuf, size_t errlen)
{
    *value = nullptr;
    try {
        toml::table root = toml::parse(std::string_view(text, len));
        const toml::node *at = root.get(table);
        if (at && !at->is_table()) {
            set_error(errbuf, errlen, std::string("[") + table + "] is not a table");
            return -1;
        }
        at = at ? at->as_table()->get(subtable) : nullptr;
        if (at && !at->is_table()) {
            set_error(errbuf, errlen, std::string("[") + table + "." + subtable + "] is not a table");
            return -1;
        }
        at = at ? at->as_table()->get(key) : nullptr;
        if (!at)
            return 0;
        const toml::value<std::string> *s = at->as_string();
        if (!s) {
            set_error(errbuf, errlen, std::string(key) + " is not a string");
            return -1;
        }
        const std::string &v = s->get();
        if (v.find('\0') != std::string::npos) {
            set_error(errbuf, errlen, std::string(key) + " holds a NUL");
            return -1;
        }
        char *copy = static_cast<char *>(std::malloc(v.size() + 1));
        if (!copy) {
            set_error(errbuf, errlen, "out of memory");
            return -1;
        }
        std::memcpy(copy, v.c_str(), v.size() + 1);
        *value = copy;
        return 1;
    } catch (const toml::parse_error &e) {
        std::ostringstream msg;
        msg << "line " << e.source().begin.line << ": " << e.description();
        set_error(errbuf, errlen, msg.str());
    } catch (const std::exception &e) {
        set_error(errbuf, errlen, e.what());
    } catch (...) {
        set_error(errbuf, errlen, "TOML parser failed");
    }
    return -1;
}
