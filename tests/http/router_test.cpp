// The route table the BSO server and zeusd dispatch through: matching, path parameters, and the
// host's own answers for no route.
#include "http/router.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace zeus::http {
namespace {

using Outcome = Router::Outcome;

// A handler that names itself and its parameters in the body.
RouteHandler named(std::string name) {
  return [name](const Request&, Response& res, const PathParams& params) {
    res.body = name;
    for (const auto& [key, value] : params) {
      res.body += " " + key + "=" + value;
    }
  };
}

Request request(std::string method, std::string path) {
  Request req;
  req.method = std::move(method);
  req.path = std::move(path);
  req.target = req.path;
  return req;
}

// Runs `method path` through the router; the body says who answered.
std::string answer(const Router& router, const std::string& method, const std::string& path) {
  const Router::NoRoute no_route{
      [](const Request&, Response& res) {
        res.status = 404;
        res.body = "not found";
      },
      [](const Request&, Response& res, const std::vector<std::string>& allowed) {
        res.status = 405;
        res.body = "allowed:";
        for (const std::string& name : allowed) {
          res.body += " " + name;
        }
      }};
  Response res;
  router.dispatch(request(method, path), path, res, no_route);
  return res.body;
}

// `method path` -> the expected answer.
struct Case {
  const char* method;
  const char* path;
  const char* answer;
};

void expect_answers(const Router& router, std::initializer_list<Case> cases) {
  for (const Case& c : cases) {
    EXPECT_EQ(answer(router, c.method, c.path), c.answer) << c.method << " " << c.path;
  }
}

// The BSO server's table.
Router bso_like() {
  Router router;
  router.add("POST", "/jobs", named("register"));
  router.add("DELETE", "/jobs", named("delete"));
  router.add("GET", "/jobs", named("list"));
  router.add("GET", "/jobs/batch_size", named("dispatch"));
  router.add("GET", "/jobs/{job_id}", named("state"));
  router.add("GET", "/healthz", named("health"));
  return router;
}

TEST(Router, ExactPathsByMethod) {
  const Router router = bso_like();
  expect_answers(router, {{"POST", "/jobs", "register"},
                          {"DELETE", "/jobs", "delete"},
                          {"GET", "/jobs", "list"},
                          {"GET", "/healthz", "health"}});
}

TEST(Router, UnknownPathIsNotFound) {
  const Router router = bso_like();
  expect_answers(router, {{"GET", "/nope", "not found"},
                          {"GET", "/", "not found"},
                          {"GET", "", "not found"},
                          {"GET", "*", "not found"},
                          {"GET", "jobs", "not found"},
                          {"GET", "http://host/jobs", "not found"},
                          {"GET", "/healthz/more", "not found"},
                          {"GET", "/jobs/a/b", "not found"}});
}

TEST(Router, PathsMatchByteForByte) {
  // Folding "//" or a trailing '/' is the host's business.
  const Router router = bso_like();
  expect_answers(router,
                 {{"GET", "/healthz/", "not found"},
                  {"GET", "//healthz", "not found"},
                  {"GET", "/HEALTHZ", "not found"},
                  // "/jobs/" is "/jobs" and an empty parameter: a parameter needs a segment.
                  {"GET", "/jobs/", "not found"},
                  {"GET", "/jobs//x", "not found"}});
}

TEST(Router, KnownPathWithAnotherMethodListsTheAllowedOnes) {
  const Router router = bso_like();
  expect_answers(router, {{"PUT", "/jobs", "allowed: POST DELETE GET"},
                          {"POST", "/healthz", "allowed: GET"},
                          // Methods match as sent: HEAD is not GET, and case matters.
                          {"HEAD", "/healthz", "allowed: GET"},
                          {"get", "/healthz", "allowed: GET"}});
}

TEST(Router, ParametersAreTheSegmentsAsSent) {
  const Router router = bso_like();
  expect_answers(router, {{"GET", "/jobs/abc", "state job_id=abc"},
                          {"GET", "/jobs/a%2Fb%20c", "state job_id=a%2Fb%20c"},
                          {"POST", "/jobs/abc", "allowed: GET"}});

  const Router::Match match = router.match("GET", "/jobs/x1");
  ASSERT_EQ(match.outcome, Outcome::kMatched);
  ASSERT_NE(match.handler, nullptr);
  EXPECT_EQ(match.params, (PathParams{{"job_id", "x1"}}));
}

TEST(Router, LiteralSegmentBeatsParameter) {
  const Router router = bso_like();
  expect_answers(
      router, {{"GET", "/jobs/batch_size", "dispatch"},
               // The literal path answers for its own methods: no fall-through to "/jobs/{job_id}".
               {"POST", "/jobs/batch_size", "allowed: GET"}});

  Router mixed;
  mixed.add("GET", "/a/{x}/c", named("late literal"));
  mixed.add("GET", "/a/b/{y}", named("early literal"));
  mixed.add("GET", "/{p}/{q}/{r}", named("all parameters"));
  expect_answers(mixed, {{"GET", "/a/b/c", "early literal y=c"},
                         {"GET", "/a/z/c", "late literal x=z"},
                         {"GET", "/q/b/c", "all parameters p=q q=b r=c"},
                         {"GET", "/a/b", "not found"}});
}

TEST(Router, AnyMethod) {
  Router router;
  router.add(Router::kAnyMethod, "/_noop", named("noop"));
  router.add("GET", "/both", named("get"));
  router.add(Router::kAnyMethod, "/both", named("other"));
  for (const char* method : {"GET", "POST", "PATCH", "DELETE", "PUT", "OPTIONS", "FOO"}) {
    EXPECT_EQ(answer(router, method, "/_noop"), "noop") << method;
  }
  expect_answers(router, {{"GET", "/both", "get"}, {"POST", "/both", "other"}});
}

TEST(Router, PlainHandlers) {
  Router router;
  router.add("GET", "/time",
             Handler([](const Request& req, Response& res) { res.body = "time " + req.method; }));
  router.add("GET", "/items/{id}",
             Handler([](const Request&, Response& res) { res.body = "item"; }));
  expect_answers(router, {{"GET", "/time", "time GET"}, {"GET", "/items/3", "item"}});
}

TEST(Router, RootPath) {
  Router router;
  router.add("GET", "/", named("root"));
  expect_answers(router, {{"GET", "/", "root"}, {"GET", "//", "not found"}});
}

TEST(Router, WithoutAMethodNotAllowedAnswerEveryMissIsNotFound) {
  // zeusd's way (the reference's actix routes): a known path with another method is a 404.
  Router router;
  router.add("GET", "/time", named("time"));
  int not_found = 0;
  const Router::NoRoute no_route{[&](const Request&, Response& res) {
                                   ++not_found;
                                   res.status = 404;
                                 },
                                 nullptr};
  Response res;
  EXPECT_EQ(router.dispatch(request("POST", "/time"), "/time", res, no_route),
            Outcome::kMethodNotAllowed);
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(router.dispatch(request("GET", "/gone"), "/gone", res, no_route), Outcome::kNotFound);
  EXPECT_EQ(not_found, 2);
  Response found;
  EXPECT_EQ(router.dispatch(request("GET", "/time"), "/time", found, no_route), Outcome::kMatched);
  EXPECT_EQ(found.body, "time");
}

TEST(Router, DispatchRoutesTheGivenPathAndPassesTheRequest) {
  // The BSO server routes its folded path; the handler still sees the request as sent.
  Router router;
  router.add("GET", "/jobs",
             [](const Request& req, Response& res, const PathParams&) { res.body = req.path; });
  const Router::NoRoute no_route{[](const Request&, Response& res) { res.body = "not found"; },
                                 nullptr};
  Response res;
  EXPECT_EQ(router.dispatch(request("GET", "//jobs/"), "/jobs", res, no_route), Outcome::kMatched);
  EXPECT_EQ(res.body, "//jobs/");
}

TEST(Router, HandlerExceptionsReachTheCaller) {
  Router router;
  router.add("GET", "/boom", [](const Request&, Response&, const PathParams&) {
    throw std::runtime_error("boom");
  });
  const Router::NoRoute no_route{[](const Request&, Response&) {}, nullptr};
  Response res;
  EXPECT_THROW(router.dispatch(request("GET", "/boom"), "/boom", res, no_route),
               std::runtime_error);
}

TEST(Router, RefusesAmbiguousOrMalformedRoutes) {
  Router router;
  router.add("GET", "/jobs/{job_id}", named("state"));
  EXPECT_THROW(router.add("GET", "/jobs/{job_id}", named("again")), std::invalid_argument);
  EXPECT_THROW(router.add("POST", "/jobs/{name}", named("renamed")), std::invalid_argument);
  EXPECT_THROW(router.add("GET", "jobs", named("relative")), std::invalid_argument);
  EXPECT_THROW(router.add("GET", "", named("empty")), std::invalid_argument);
  EXPECT_THROW(router.add("GET", "/jobs/{}", named("unnamed")), std::invalid_argument);
  EXPECT_THROW(router.add("", "/jobs", named("no method")), std::invalid_argument);
  // Another method on the same path is fine, and so is a literal beside the parameter.
  router.add("DELETE", "/jobs/{job_id}", named("delete"));
  router.add("GET", "/jobs/batch_size", named("dispatch"));
  expect_answers(router, {{"DELETE", "/jobs/7", "delete job_id=7"},
                          {"PUT", "/jobs/7", "allowed: GET DELETE"}});
}

}  // namespace
}  // namespace zeus::http
