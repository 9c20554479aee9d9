// How long zeus waits for an outside service and how much of an answer it reads: the defaults of
// every client (BSO server, zeusd, Pushgateway, ElectricityMaps, OpenEI, `zeus demo`'s probe), in
// one place; docs/security.md ("Outside services") lists them. An exchange's deadline covers all
// of it (connect, request, the whole answer) however slowly the bytes come; a fetch's deadline
// covers its retries and the pauses between them too.
#pragma once

#include <cstddef>

namespace zeus::outside_services {

inline constexpr std::size_t kMiB = std::size_t{1} << 20;

// A client with one per-read timeout (BSO, zeusd, Pushgateway) gives a whole exchange this many
// of them: 15 s at the usual 5 s.
inline constexpr double kReadTimeoutsPerExchange = 3.0;

// The BSO server's answers (Python's BatchSizeOptimizer too).
inline constexpr std::size_t kBsoMaxBodyBytes = 16 * kMiB;
// All of one BSO request, its retries and pauses included.
inline constexpr double kBsoRequestTimeoutS = 120.0;

// zeusd's plain requests (its SSE streams are long-lived: each event is bounded instead).
inline constexpr std::size_t kZeusdMaxBodyBytes = 1 * kMiB;

// The Pushgateway's answers to a push or a delete (empty when all is well).
inline constexpr std::size_t kPushgatewayMaxBodyBytes = 1 * kMiB;

// ElectricityMaps (carbon intensity): one fetch, retries and pauses included, and its body.
inline constexpr double kCarbonFetchTimeoutS = 15.0;
inline constexpr std::size_t kCarbonMaxBodyBytes = 16 * kMiB;

// OpenEI (electricity prices): one fetch, retries and pauses included, and its body.
inline constexpr double kPriceFetchTimeoutS = 30.0;
inline constexpr std::size_t kPriceMaxBodyBytes = 16 * kMiB;

// The CLI's carbon and price lookups (`zeus monitor`, `zeus exporter`, `zeus report`): a hung or
// trickling service holds a summary back at most this long, and never its energy figures.
inline constexpr double kCliFetchTimeoutS = 6.0;

// `zeus demo`'s readiness probe of the server it started.
inline constexpr double kProbeExchangeTimeoutS = 3.0;
inline constexpr std::size_t kProbeMaxBodyBytes = 64 * 1024;

}  // namespace zeus::outside_services
