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

namespace {

void set_error(char *errbuf, size_t errlen, const std::string &what)
{
    if (errbuf && errlen)
        std::snprintf(errbuf, errlen, "%s", what.c_str());
}

} // namespace

extern "C" char *pgd_toml_json_text(const char *text, size_t len, char *errbuf, size_t errlen)
{
    try {
        toml::table table = toml::parse(std::string_view(text, len));
        std::ostringstream out;
        out << toml::json_formatter{table};
        std::string json = out.str();
        char *copy = static_cast<char *>(std::malloc(json.size() + 1));
        if (!copy) {
            set_error(errbuf, errlen, "out of memory");
            return nullptr;
        }
        std::memcpy(copy, json.data(), json.size() + 1);
        return copy;
    } catch (const toml::parse_error &e) {
        std::ostringstream msg;
        msg << "line " << e.source().begin.line << ": " << e.description();
        set_error(errbuf, errlen, msg.str());
    } catch (const std::exception &e) {
        set_error(errbuf, errlen, e.what());
    } catch (...) {
        set_error(errbuf, errlen, "TOML parser failed");
    }
    return nullptr;
}
