// The route table of the hosts on zeus::http (the BSO server and zeusd): method and path to a
// handler.
//
// A pattern is a path ("/jobs/batch_size") whose segments may be parameters ("/jobs/{id}"): a
// parameter matches any one non-empty segment, as sent (not percent-decoded), and a literal
// segment beats a parameter at the same place, so "/jobs/batch_size" wins over "/jobs/{id}".
// Paths match byte for byte (a host that folds "//" or a trailing '/' passes its folded path).
// The router sends no bytes of its own: a path no route has, and a known path asked with another
// method, go to the host's responders, so that each host keeps its own 404 and 405.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http/host.hpp"

namespace zeus::http {

// A matched route's path parameters by name ("id" for "{id}"), each the segment as sent.
using PathParams = Fields;

// A route's handler: the request, its response and the route's path parameters.
using RouteHandler = std::function<void(const Request&, Response&, const PathParams&)>;

class Router {
 public:
  // The method of a route that takes every method of its path.
  static constexpr std::string_view kAnyMethod = "*";

  // Adds a route (all of them before the first match). Throws std::invalid_argument for a pattern
  // that does not start with '/', a parameter without a name, a method the path already has, or a
  // pattern that names the parameters of an existing path differently ("/jobs/{id}" and
  // "/jobs/{name}").
  void add(std::string_view method, std::string_view pattern, RouteHandler handler);
  // The same handler for a path that needs no parameters.
  void add(std::string_view method, std::string_view pattern, Handler handler);

  enum class Outcome { kMatched, kNotFound, kMethodNotAllowed };

  struct Match {
    Outcome outcome = Outcome::kNotFound;
    const RouteHandler* handler = nullptr;  // kMatched: the route's (owned by the router)
    PathParams params;                      // kMatched
    std::vector<std::string> allowed;       // kMethodNotAllowed: the path's methods, as added
  };

  // The route of `method` on `path` (req.path, or the host's folded form of it). Methods match
  // exactly (case matters; HEAD is not GET).
  Match match(std::string_view method, std::string_view path) const;

  // A host's answers when no route takes a request. Without method_not_allowed, a known path
  // asked with another method is answered by not_found too.
  struct NoRoute {
    std::function<void(const Request&, Response&)> not_found;
    std::function<void(const Request&, Response&, const std::vector<std::string>& allowed)>
        method_not_allowed;
  };

  // Runs the handler of the route of req.method on `path`, or the host's answer; what a handler
  // throws goes to the caller.
  Outcome dispatch(const Request& req, std::string_view path, Response& res,
                   const NoRoute& no_route) const;

 private:
  struct Segment {
    std::string text;  // the literal, or the parameter's name
    bool parameter = false;
  };
  struct Path {
    std::vector<Segment> segments;
    std::vector<std::pair<std::string, RouteHandler>> methods;  // in the order added
  };

  Path& path_for(std::string_view pattern);
  Match choose(const Path& path, std::string_view method) const;

  std::vector<Path> paths_;
  // Paths without parameters, by their text: most requests are found with one lookup.
  std::unordered_map<std::string, std::size_t> literal_paths_;
};

}  // namespace zeus::http
