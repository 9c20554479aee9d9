#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (run from anywhere; overwrites the seeds it makes).

Real requests of the three servers, real BSO bodies, and zeusd tokens signed with the fuzz
targets' fixed test key (fuzz/jwt.cpp), so that the seeds get past the signature check.
"""
import base64
import hashlib
import hmac
import json
import os

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
KEY = b"zeus-fuzz-signing-key-0123456789abcdef"  # the same as in jwt.cpp
HEADER = '{"typ":"JWT","alg":"HS256"}'


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as out:
        out.write(data)


def b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def token(claims, header=HEADER):
    signing_input = b64(header.encode()) + "." + b64(claims.encode())
    mac = hmac.new(KEY, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64(mac)


READ_CLAIMS = '{"sub":"alice","scopes":["gpu-read"]}'
CONTROL_CLAIMS = '{"sub":"trainer","scopes":["gpu-control","gpu-read","cpu-read"],"exp":1700003600}'
EXPIRED_CLAIMS = '{"sub":"old","scopes":["gpu-read"],"exp":1600000000}'
CONTROL_TOKEN = token(CONTROL_CLAIMS)

SPEC = json.dumps(
    {"max_power": 700.0, "number_of_gpus": 1, "gpu_model": "NVIDIA H200", "job_id": "mnist-h200",
     "job_id_prefix": "mnist", "batch_sizes": [32, 64, 128, 256], "default_batch_size": 128,
     "eta_knob": 0.5, "beta_knob": 2.0, "target_metric": 0.9, "higher_is_better_metric": True,
     "max_epochs": 30, "num_pruning_rounds": 2, "window_size": 0, "mab_prior_mean": 0.0,
     "mab_prior_precision": 0.0, "mab_num_explorations": 2, "mab_seed": 123456},
    separators=(",", ":"))
REPORT = ('{"job_id":"mnist-h200","batch_size":128,"trial_number":3,"time":12.5,"energy":4200.0,'
          '"metric":0.41,"current_epoch":2}')


def http_request():
    write("http_request", "bso_register_job",
          "POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept: */*\r\n"
          "Accept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
          "User-Agent: python-httpx/0.23.3\r\nContent-Type: application/json\r\n"
          f"Content-Length: {len(SPEC)}\r\n\r\n{SPEC}")
    write("http_request", "bso_batch_size",
          "GET /jobs/batch_size?job_id=mnist-h200 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
          "Accept: */*\r\nUser-Agent: python-httpx/0.23.3\r\n\r\n")
    chunked = f"{40:x}\r\n{REPORT[:40]}\r\n{len(REPORT) - 40:x}\r\n{REPORT[40:]}\r\n0\r\n\r\n"
    write("http_request", "bso_report_chunked",
          "POST /report HTTP/1.1\r\nHost: localhost:8000\r\nContent-Type: application/json\r\n"
          "Transfer-Encoding: chunked\r\n\r\n" + chunked)
    write("http_request", "zeusd_set_power_limit",
          "POST /gpu/set_power_limit?gpu_ids=0,1&power_limit=250000&block=true HTTP/1.1\r\n"
          f"Host: localhost\r\nAuthorization: Bearer {CONTROL_TOKEN}\r\nContent-Length: 0\r\n\r\n")
    write("http_request", "zeusd_discover",
          "GET /discover HTTP/1.1\r\nHost: localhost\r\nuser-agent: zeus/0.11.0\r\n\r\n")
    write("http_request", "metrics_scrape",
          "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nUser-Agent: Prometheus/2.42.0\r\n"
          "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
          "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
          "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n")
    write("http_request", "http10_no_host", "GET /healthz HTTP/1.0\r\n\r\n")
    write("http_request", "expect_continue",
          "POST /jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}")
    write("http_request", "delete_percent_query",
          "DELETE /jobs?job_id=caf%C3%A9+job&x= HTTP/1.1\r\nHost: x\r\n\r\n")


def bso_wire():
    write("bso_wire", "job_spec", SPEC)
    write("bso_wire", "job_spec_generated_id", json.dumps(
        {"max_power": 3000, "number_of_gpus": "4", "gpu_model": "NVIDIA A100-SXM4-40GB",
         "job_id": None, "job_id_prefix": "bert", "batch_sizes": [8, 16, 24, 32],
         "default_batch_size": 16.0, "eta_knob": 0.5, "beta_knob": None, "target_metric": 0.8,
         "higher_is_better_metric": "true", "max_epochs": 10, "num_pruning_rounds": 1,
         "window_size": 10, "mab_prior_mean": 0.0, "mab_prior_precision": 0.0,
         "mab_num_explorations": 2, "mab_seed": None}))
    write("bso_wire", "trial_id", '{"job_id": "mnist-h200", "batch_size": 128, "trial_number": 3}')
    write("bso_wire", "training_result", REPORT)
    write("bso_wire", "report_response",
          '{"stop_train": false, "converged": true, '
          '"message": "Trial 3 of batch size 128 converged at epoch 2."}')
    write("bso_wire", "bad_types",
          '{"max_power": "lots", "number_of_gpus": -1, "batch_sizes": [32, "x", 1e999], '
          '"job_id": "a/b"}')
    write("bso_wire", "truncated", '{"job_id": "mnist-h200", "batch_size": 12')


def zeusd_query():
    write("zeusd_query", "set_power_limit", "gpu_ids=0,1&power_limit=250000&block=true")
    write("zeusd_query", "set_frequency", "gpu_ids=3&min_clock_mhz=900&max_clock_mhz=1410&block=false")
    write("zeusd_query", "job_id_encoded", "job_id=caf%C3%A9+job%2F1&&empty=&flag")
    write("zeusd_query", "bad_escape", "job_id=%zz&x=%4")
    write("zeusd_query", "bearer_header", "Bearer " + CONTROL_TOKEN)
    write("zeusd_query", "utf8_mixed",
          "name=\u00fcber \u20ac \U0001F600".encode() + b"\xed\xa0\x80\xc0\xaf")


def jwt():
    # The first byte is the mode (jwt.cpp): 0 token, 1 header\nclaims, 2 path\nclaims, 3 text.
    write("jwt", "token_control", b"\x00" + CONTROL_TOKEN.encode())
    write("jwt", "token_read", b"\x00" + token(READ_CLAIMS).encode())
    write("jwt", "token_expired", b"\x00" + token(EXPIRED_CLAIMS).encode())
    write("jwt", "token_alg_none",
          b"\x00" + (b64(b'{"typ":"JWT","alg":"none"}') + "." + b64(READ_CLAIMS.encode()) + ".").encode())
    write("jwt", "signed_claims", b"\x01" + HEADER.encode() + b"\n" + CONTROL_CLAIMS.encode())
    write("jwt", "signed_bad_scope", b'\x01\n{"sub":"x","scopes":["gpu-write"],"exp":-1}')
    write("jwt", "authorize_set", b"\x02/gpu/set_power_limit\n" + READ_CLAIMS.encode())
    write("jwt", "authorize_whoami", b"\x02/auth/whoami\n" + CONTROL_CLAIMS.encode())
    write("jwt", "scope_list", b"\x03gpu-control,gpu-read,gpu-read")
    write("jwt", "duration", b"\x037d")


def prometheus_labels():
    write("prometheus_labels", "window_epoch", "epoch_3")
    write("prometheus_labels", "window_quoted", 'train "step" \\ 1\nnext')
    write("prometheus_labels", "gpu_name", "NVIDIA H200")
    write("prometheus_labels", "gpu_uuid", "GPU-5a1f3c2e-9b7d-4e61-a0c3-2f8e1d6b7a90")
    write("prometheus_labels", "help_text", "GPU energy of each measurement window, in joules\\n")
    write("prometheus_labels", "unicode", "fen\u00eatre \u00e9nergie \u26a1")


if __name__ == "__main__":
    http_request()
    bso_wire()
    zeusd_query()
    jwt()
    prometheus_labels()
