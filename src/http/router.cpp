#include "http/router.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "common/text.hpp"

namespace zeus::http {
namespace {

// "/jobs/{id}" -> {"jobs", "{id}"}; "/" -> {""}. nullopt without the leading '/'.
std::optional<std::vector<std::string_view>> segments_of(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return std::nullopt;
  }
  return text::split(path.substr(1), '/');
}

bool is_parameter(std::string_view segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

}  // namespace

void Router::add(std::string_view method, std::string_view pattern, RouteHandler handler) {
  if (method.empty()) {
    throw std::invalid_argument("a route needs a method");
  }
  Path& path = path_for(pattern);
  for (const auto& [existing, _] : path.methods) {
    if (existing == method) {
      throw std::invalid_argument("two routes for " + std::string(method) + " " +
                                  std::string(pattern));
    }
  }
  path.methods.emplace_back(std::string(method), std::move(handler));
}

void Router::add(std::string_view method, std::string_view pattern, Handler handler) {
  add(method, pattern,
      RouteHandler([handler = std::move(handler)](const Request& req, Response& res,
                                                  const PathParams&) { handler(req, res); }));
}

Router::Path& Router::path_for(std::string_view pattern) {
  const auto pieces = segments_of(pattern);
  if (!pieces) {
    throw std::invalid_argument("a route's path starts with '/': " + std::string(pattern));
  }
  std::vector<Segment> segments;
  bool literal = true;
  for (const std::string_view piece : *pieces) {
    if (is_parameter(piece)) {
      if (piece.size() == 2) {
        throw std::invalid_argument("a path parameter needs a name: " + std::string(pattern));
      }
      segments.push_back({std::string(piece.substr(1, piece.size() - 2)), true});
      literal = false;
    } else {
      segments.push_back({std::string(piece), false});
    }
  }
  auto same_shape = [&](const Path& path) {
    return std::equal(path.segments.begin(), path.segments.end(), segments.begin(), segments.end(),
                      [](const Segment& a, const Segment& b) {
                        return a.parameter == b.parameter && (a.parameter || a.text == b.text);
                      });
  };
  const auto found = std::find_if(paths_.begin(), paths_.end(), same_shape);
  if (found != paths_.end()) {
    for (std::size_t i = 0; i < segments.size(); ++i) {
      if (found->segments[i].text != segments[i].text) {
        throw std::invalid_argument("a path's parameters are named once: " + std::string(pattern));
      }
    }
    return *found;
  }
  if (literal) {
    literal_paths_.emplace(std::string(pattern), paths_.size());
  }
  paths_.push_back({std::move(segments), {}});
  return paths_.back();
}

Router::Match Router::match(std::string_view method, std::string_view path) const {
  if (const auto found = literal_paths_.find(std::string(path)); found != literal_paths_.end()) {
    return choose(paths_[found->second], method);
  }
  const auto pieces = segments_of(path);
  if (!pieces) {
    return {};
  }
  // The most specific path with parameters: at the first segment where two candidates differ,
  // the literal one wins.
  const Path* best = nullptr;
  for (const Path& candidate : paths_) {
    if (candidate.segments.size() != pieces->size()) {
      continue;
    }
    bool matches = true;
    for (std::size_t i = 0; i < pieces->size() && matches; ++i) {
      const Segment& segment = candidate.segments[i];
      matches = segment.parameter ? !(*pieces)[i].empty() : segment.text == (*pieces)[i];
    }
    if (!matches) {
      continue;
    }
    const bool more_specific =
        best == nullptr ||
        std::lexicographical_compare(
            candidate.segments.begin(), candidate.segments.end(), best->segments.begin(),
            best->segments.end(),
            [](const Segment& a, const Segment& b) { return !a.parameter && b.parameter; });
    if (more_specific) {
      best = &candidate;
    }
  }
  if (best == nullptr) {
    return {};
  }
  Match out = choose(*best, method);
  if (out.outcome == Outcome::kMatched) {
    for (std::size_t i = 0; i < pieces->size(); ++i) {
      if (best->segments[i].parameter) {
        out.params.emplace_back(best->segments[i].text, std::string((*pieces)[i]));
      }
    }
  }
  return out;
}

Router::Match Router::choose(const Path& path, std::string_view method) const {
  Match out;
  const RouteHandler* any = nullptr;
  for (const auto& [name, handler] : path.methods) {
    if (name == method) {
      out.outcome = Outcome::kMatched;
      out.handler = &handler;
      return out;
    }
    if (name == kAnyMethod) {
      any = &handler;
    }
  }
  if (any != nullptr) {
    out.outcome = Outcome::kMatched;
    out.handler = any;
    return out;
  }
  out.outcome = Outcome::kMethodNotAllowed;
  for (const auto& [name, _] : path.methods) {
    out.allowed.push_back(name);
  }
  return out;
}

Router::Outcome Router::dispatch(const Request& req, std::string_view path, Response& res,
                                 const NoRoute& no_route) const {
  const Match route = match(req.method, path);
  switch (route.outcome) {
    case Outcome::kMatched:
      (*route.handler)(req, res, route.params);
      break;
    case Outcome::kMethodNotAllowed:
      if (no_route.method_not_allowed) {
        no_route.method_not_allowed(req, res, route.allowed);
      } else {
        no_route.not_found(req, res);
      }
      break;
    case Outcome::kNotFound:
      no_route.not_found(req, res);
      break;
  }
  return route.outcome;
}

}  // namespace zeus::http
