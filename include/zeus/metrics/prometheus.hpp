// Prometheus pull export (text exposition format 0.0.4), one header per part:
//   zeus/metrics/device_metrics.hpp     DeviceMetrics: the devices' series, refreshed in the
//                                       background and rendered on scrape
//   zeus/metrics/window_histograms.hpp  WindowHistograms: per-window energy and duration
//   zeus/metrics/metrics_server.hpp     MetricsServer: GET /metrics
// This header includes all three. See docs/prometheus.md for every metric, its type, unit and
// labels; the push side is zeus/metrics/pushgateway.hpp.
#pragma once

#include "zeus/metrics/device_metrics.hpp"
#include "zeus/metrics/metrics_server.hpp"
#include "zeus/metrics/window_histograms.hpp"
