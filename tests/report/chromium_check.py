#!/usr/bin/env python3
"""`zeus report` drawn in headless Chromium.

Makes the three input kinds with the real `zeus` binary (a power timeline on simulated GPUs, a
small simulation, a power-limit profile), writes the report (with --carbon-intensity and --price,
which chart the timeline's emissions and cost beside its power), loads it in headless Chromium and
checks the page's own status marker: no console or script error, and every chart canvas painted.
Saves a screenshot as a test artifact. Exit code 77 (CTest SKIP_RETURN_CODE) when Chromium is not
installed.
"""
import argparse
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

PROFILE = {"measurements": [
    {"power_limit": 300, "energy": 900.0, "time": 3.0},
    {"power_limit": 250, "energy": 780.0, "time": 3.3},
    {"power_limit": 200, "energy": 700.0, "time": 3.9},
    {"power_limit": 150, "energy": 690.0, "time": 5.0},
]}


class StatusFinder(html.parser.HTMLParser):
    """Finds #zeus-report-status and counts chart canvases in the dumped DOM."""

    def __init__(self):
        super().__init__()
        self.status = None
        self.canvases = 0
        self._in_status = False
        self.status_text = ""

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "canvas" and "data-chart" in attributes:
            self.canvases += 1
        if attributes.get("id") == "zeus-report-status":
            self.status = attributes
            self._in_status = True

    def handle_endtag(self, tag):
        if tag == "div":
            self._in_status = False

    def handle_data(self, data):
        if self._in_status:
            self.status_text += data


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAILED ({result.returncode}): {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--zeus", required=True, help="the zeus binary")
    parser.add_argument("--artifacts", required=True, help="where the screenshot goes")
    parser.add_argument("--chromium", help="the browser (default: chromium on PATH)")
    args = parser.parse_args()
    args.zeus = os.path.abspath(args.zeus)
    args.artifacts = os.path.abspath(args.artifacts)

    chromium = args.chromium or find_chromium()
    if not chromium:
        print("SKIP: Chromium is not installed (Debian: apt-get install chromium); "
              "the page cannot be checked in a browser")
        return SKIP

    os.makedirs(args.artifacts, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="zeus_report_chromium_") as work:
        env = dict(os.environ, ZEUS_SIMULATED_GPUS="2:h200")
        run([args.zeus, "monitor", "--timeline", "t.csv", "--duration", "2s", "--interval",
             "50ms"], cwd=work, env=env)
        run([args.zeus, "sim", "--workload", "cifar100", "--gpu", "v100", "--policy", "all",
             "--seeds", "1-3", "--out", "sim", "--threads", "2"], cwd=work)
        with open(os.path.join(work, "profile.json"), "w", encoding="utf-8") as file:
            json.dump(PROFILE, file)
        # A carbon-intensity series whose value changes a second into the timeline (a stepped
        # rate on the emissions chart), and a constant price.
        with open(os.path.join(work, "t.csv"), encoding="utf-8") as file:
            first_time = float(file.readlines()[1].split(",")[0])
        with open(os.path.join(work, "intensity.csv"), "w", encoding="utf-8") as file:
            file.write(f"timestamp,gco2eq_per_kwh\n{first_time - 3600:.3f},300\n"
                       f"{first_time + 1:.3f},450\n")
        report = os.path.join(work, "report.html")
        run([args.zeus, "report", "t.csv", "sim", "profile.json", "--carbon-intensity",
             "intensity.csv", "--price", "0.3", "--out", report], cwd=work)
        shutil.copy(report, os.path.join(args.artifacts, "report.html"))

        # A fresh profile directory each time; no network is needed or allowed to matter.
        browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
                   "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
                   f"--user-data-dir={os.path.join(work, 'chromium-profile')}",
                   "--virtual-time-budget=5000"]
        url = "file://" + report
        dom = run(browser + ["--dump-dom", url]).stdout
        with open(os.path.join(args.artifacts, "report-dom.html"), "w", encoding="utf-8") as file:
            file.write(dom)
        screenshot = os.path.join(args.artifacts, "report.png")
        if os.path.exists(screenshot):
            os.remove(screenshot)
        run(browser + [f"--screenshot={screenshot}", "--window-size=1400,3400", url])

    finder = StatusFinder()
    finder.feed(dom)
    failures = []
    if finder.status is None:
        failures.append("the page did not write #zeus-report-status (its script did not finish)")
    else:
        charts = int(finder.status.get("data-charts", "-1"))
        nonempty = int(finder.status.get("data-charts-nonempty", "-1"))
        errors = int(finder.status.get("data-errors", "-1"))
        print(f"charts: {charts}, painted: {nonempty}, errors: {errors}")
        if errors != 0:
            failures.append(f"{errors} error(s) on the page: {finder.status_text.strip()}")
        if charts != finder.canvases or charts != 9:
            failures.append(f"expected 9 charts (2 power timelines, 1 of the GPUs' temperatures, "
                            f"carbon emissions and electricity cost, 3 simulation plots, 1 "
                            f"profile), the page has {finder.canvases} and reports {charts}")
        if nonempty != charts:
            failures.append(f"only {nonempty} of {charts} charts have painted pixels")
    if not os.path.exists(screenshot) or os.path.getsize(screenshot) < 10_000:
        failures.append(f"no usable screenshot at {screenshot}")
    else:
        print(f"screenshot: {screenshot}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
