// The daemon's numbers in the Prometheus text exposition format, version 0.0.4
// (Content-Type: text/plain; version=0.0.4).
#pragma once

#include <string>

#include "daemon_snapshot.h"

namespace edgert::daemon {

constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// Every family with its HELP and TYPE lines, its samples together, labelled pipeline="NAME"
// (and stage="..." for latencies); daemon-wide memory has no labels.
std::string prometheus_exposition(const DaemonSnapshot& snapshot);

}  // namespace edgert::daemon
