// SPDX-License-Identifier: Apache-2.0
// containerd's configuration is TOML; Debian 12 packages no C TOML parser, so
// this one C++ file hands it to toml++ (libtomlplusplus3) and gives back JSON
// text, which the C side reads with jansson. Nothing else in pullgate is C++.
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

} // namespace

extern "C" char *pgd_toml_json_text(const char *text, size_t len, pg_error *err)
{
    try {
        toml::table table = toml::parse(std::string_view(text, len));
        std::ostringstream out;
        out << toml::json_formatter{table};
        std::string json = out.str();
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
