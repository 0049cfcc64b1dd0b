# SPDX-License-Identifier: Apache-2.0
# cmake -DIN=prometheus-rules.yaml -DOUT=pullgate-rules.yml -P plain-rules.cmake
# The PrometheusRule's `spec` is a plain Prometheus rules file (`groups:`) indented by two:
# cut it out and de-indent it, so that `promtool check rules` and a Prometheus without the
# operator take it as it is. One source for both forms (packaging/kubernetes/prometheus-rules.yaml).
file(READ "${IN}" text)
string(FIND "${text}" "\nspec:\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${IN}: no top-level spec:")
endif()
math(EXPR at "${at} + 7")
string(SUBSTRING "${text}" ${at} -1 spec)
# (no ^ anchor: CMake's REGEX REPLACE matches it again after every replacement)
string(REPLACE "\n  " "\n" spec "\n${spec}")
string(SUBSTRING "${spec}" 1 -1 spec)
file(WRITE "${OUT}" "# pullgate's alert rules, a plain Prometheus rules file (rule_files: in prometheus.yml).\n"
                    "# Made from the PrometheusRule beside it (prometheus-rules.yaml, for the Prometheus\n"
                    "# Operator); docs/metrics.md says what each alert means and what to do.\n"
                    "${spec}")
