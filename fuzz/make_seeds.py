#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (run from anywhere; overwrites the seeds it makes).

Real requests of the three servers, real BSO bodies, and zeusd tokens signed with the fuzz
targets' fixed test key (fuzz/jwt.cpp), so that the seeds get past the signature check; for the
file and environment parsers, a few lines each of every format, valid and nearly valid.
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


# ---- File and environment parsers (issue 15) ----
# Small inputs of our own in the formats of ../shared/data (never copies of those files).

TRAIN_HEADER = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
POWER_HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"


def train_rows(names, sizes, target, epochs):
    rows = ""
    for size in sizes:
        for run, epoch in enumerate(epochs):
            rows += f"{names[0]},{names[1]},{size},{names[2]},0.001,{run},{target},{epoch}\n"
    return rows


def power_rows(names, sizes, limits):
    rows = ""
    for size in sizes:
        for limit in limits:
            rows += (f"{names[0]},{names[1]},{size},{names[2]},{limit},"
                     f"{30 + 4000 / (size + limit):.4f},{0.8 * limit:.1f}\n")
    return rows


def trace_csv():
    # Byte 0 (fuzz/trace_csv.cpp): bits 0-1 which file(s) the rest is (0 train, 1 power, 2 both,
    # split at a NUL), bits 2-4 the paper workload (0 librispeech, 4 cifar100).
    cifar = ("cifar100", "shufflenetv2", "adadelta")
    libri = ("librispeech", "deepspeech2", "adamw")
    cifar_train = TRAIN_HEADER + train_rows(cifar, [256, 1024], 0.6, [12, 9, "nan"]) + \
        train_rows(cifar, [256], 0.5, [3])
    write("trace_csv", "cifar_train", bytes([4 << 2 | 0]) + cifar_train.encode())
    cifar_power = POWER_HEADER + power_rows(cifar, [256, 512, 1024], [100, 175, 250])
    write("trace_csv", "cifar_power", bytes([4 << 2 | 1]) + cifar_power.encode())
    # b0 192 is not in the trace: capped to 128.
    libri_train = TRAIN_HEADER + train_rows(libri, [32, 128], 40.0, [10, 14])
    libri_power = POWER_HEADER + power_rows(libri, [32, 64, 128], [150, 250])
    write("trace_csv", "libri_both_capped",
          bytes([0 << 2 | 2]) + libri_train.encode() + b"\0" + libri_power.encode())
    write("trace_csv", "crlf_bom_reordered", bytes([4 << 2 | 1]) + (
        "\ufeffpower_limit,dataset,network,batch_size,optimizer,average_power,time_per_epoch\r\n"
        "250,cifar100,shufflenetv2,1024,adadelta,200.0,31.5\r\n"
        "100,cifar100,shufflenetv2,1024,adadelta,80.0,40.25\r\n").encode())
    write("trace_csv", "duplicate_run", bytes([4 << 2 | 0]) + (
        TRAIN_HEADER + train_rows(cifar, [1024], 0.6, [12, 9]) +
        "cifar100,shufflenetv2,1024,adadelta,0.001,1,0.6,20\n").encode())
    write("trace_csv", "duplicate_power_limit", bytes([4 << 2 | 1]) + (
        cifar_power + "cifar100,shufflenetv2,1024,adadelta,250,31.0,199.0\n").encode())
    write("trace_csv", "b0_never_converges", bytes([4 << 2 | 0]) + (
        TRAIN_HEADER + train_rows(cifar, [1024], 0.6, ["nan", 200])).encode())
    write("trace_csv", "huge_numbers", bytes([4 << 2 | 1]) + (
        POWER_HEADER + "cifar100,shufflenetv2,1024,adadelta,250,1e308,1e308\n"
        "cifar100,shufflenetv2,1024,adadelta,2147483648,-0.0,inf\n").encode())


def arrivals_csv():
    write("arrivals_csv", "two_jobs", "start_time,end_time\n0,3600\n1800,9000\n")
    write("arrivals_csv", "runtime_ratio",
          "start_time,end_time,runtime_ratio\r\n0,100,1.0\r\n\r\n50,400,0.5\r\n10.5,20,2\r\n")
    write("arrivals_csv", "overlapping",
          "start_time,end_time\n" + "".join(f"{i * 10},{i * 10 + 95}\n" for i in range(8)))
    write("arrivals_csv", "odd_numbers", "start_time,end_time\n0,inf\n1e309,2e309\n-5, 7\n0x10,1e3\n")
    write("arrivals_csv", "bad_rows", "start_time,end_time\n5,1\n1,2,3\nx,2\n")
    write("arrivals_csv", "bad_header", "end_time,start_time\n0,1\n")


def plo_profile():
    write("plo_profile", "a40", json.dumps({"measurements": [
        {"power_limit": 300, "energy": 5210.5, "time": 20.1},
        {"power_limit": 275, "energy": 4987.0, "time": 20.6},
        {"power_limit": 250, "energy": 4790.25, "time": 21.4},
        {"power_limit": 225, "energy": 4702.0, "time": 22.9},
        {"power_limit": 200, "energy": 4755.5, "time": 25.8}]}, indent=4))
    write("plo_profile", "one", '{"measurements":[{"power_limit":250,"energy":1,"time":1e-3}]}')
    write("plo_profile", "duplicate_limit", '{"measurements":[{"power_limit":300,"energy":9,"time":2},'
          '{"power_limit":300,"energy":1,"time":3}]}')
    write("plo_profile", "wide_integer",
          '{"measurements":[{"power_limit":4294967496,"energy":2,"time":2},'
          '{"power_limit":-4294967096,"energy":2,"time":2}]}')
    write("plo_profile", "bad_values", '{"measurements":[{"power_limit":250.5,"energy":-1,"time":0},'
          '{"power_limit":"250","energy":1e400,"time":null}], "extra": [1, {"a": []}]}')
    write("plo_profile", "not_a_profile", '[{"power_limit": 250}]')
    write("plo_profile", "truncated", '{"measurements":[{"power_limit":25')
    # After a NUL: a --selector value (fuzz/plo_profile.cpp).
    one = b'{"measurements":[{"power_limit":300,"energy":9,"time":2},{"power_limit":250,"energy":7,"time":2.5}]}'
    for name, selector in [("selector_zeus_cost", b"zeus-cost:0.3"), ("selector_energy", b"energy"),
                           ("selector_max_slowdown", b"max-slowdown:1.25"),
                           ("selector_cut_off", b"zeus-cost:"), ("selector_nan", b"max-slowdown:nan"),
                           ("selector_bad_profile", b"time")]:
        write("plo_profile", name, (b"[" if name == "selector_bad_profile" else one) + b"\0" + selector)


def monitor_log():
    header = "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy\n"
    rows = "".join(f"{1700000000 + i * 30}.25,__GlobalPowerLimitOptimizer_{300 - 25 * i},"
                   f"{20 + i}.5,{5000 - 100 * i}.0,{4990 - 90 * i}.5\n" for i in range(4))
    write("monitor_log", "plo_two_gpus", header + rows)
    write("monitor_log", "one_gpu_crlf",
          "start_time,window_name,elapsed_time,gpu3_energy\r\n1700000000.0,epoch_1,12.5,800.25\r\n"
          "\r\n1700000013.0,epoch_2,12.25,790.0\r\n")
    write("monitor_log", "no_gpus", "start_time,window_name,elapsed_time\n1.0,train,2.0\n")
    write("monitor_log", "bad_column", "start_time,window_name,elapsed_time,cpu0_energy\n1,w,2,3\n")
    write("monitor_log", "duplicate_gpu",
          "start_time,window_name,elapsed_time,gpu0_energy,gpu0_energy\n1,w,2,3,4\n")
    write("monitor_log", "bad_row", "start_time,window_name,elapsed_time,gpu0_energy\n1,w,2\nnan,w,x,1\n")


def report_timeline():
    # Byte 0 (fuzz/report_timeline.cpp): 0 one file (kind by content), 1 timeline NUL windows,
    # 2 summary.json NUL w_g_p.csv NUL configurations_w_g.csv.
    timeline = "timestamp,device,domain,watts\n" + "".join(
        f"{1700000000 + i * 0.1:.3f},gpu0,instant,{250 + i % 7 * 3.5}\n"
        f"{1700000000 + i * 0.1:.3f},gpu1,instant,{240 + i % 5 * 2.0}\n"
        f"{1700000000 + i * 0.1:.3f},cpu0,package,{95 + i % 3}\n" for i in range(6))
    windows = ("start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy\n"
               "1700000000.05,train,0.4,101.5,97.25\n")
    write("report_timeline", "timeline", b"\0" + timeline.encode())
    write("report_timeline", "timeline_with_windows",
          b"\x01" + timeline.encode() + b"\0" + windows.encode())
    write("report_timeline", "window_log", b"\0" + windows.encode() +
          b'1700000001.0,"eval <b>",0.2,50,49\n')
    write("report_timeline", "profile",
          b"\0" + b'{"measurements":[{"power_limit":300,"energy":50,"time":1},'
          b'{"power_limit":200,"energy":40,"time":1.3}]}')
    write("report_timeline", "timeline_unsorted_quoted",
          b'\0"timestamp","device","domain","watts"\r\n"5.5","gpu0","average","120"\r\n'
          b'"1.5","gpu0","average","125"\r\n')
    summary = json.dumps({"eta": 0.5, "cells": [
        {"workload": "w", "gpu": "g", "policy": "p", "oracle_expected_cost": 1234.5,
         "oracle_batch_size": 64, "oracle_power_limit_w": 200},
        {"workload": "w", "gpu": "g", "policy": "grid", "error": "did not converge"}]})
    history = ("seed,recurrence,batch_size,power_limit_w,energy_j,time_s,cost\n"
               "1,0,128,250,5000,30,7000\n1,1,64,200,4000,33,6500\n2,0,64,200,4100,32,6450\n")
    configurations = ("batch_size,power_limit_w,time_s,energy_j,cost,default,oracle,pareto\n"
                      "128,250,30,5000,7000,1,0,1\n64,200,33,4000,6500,0,1,1\n")
    write("report_timeline", "sim_dir", b"\x02" + summary.encode() + b"\0" + history.encode() +
          b"\0" + configurations.encode())


def visible_devices():
    # Byte 0 (fuzz/visible_devices.cpp): bit 0 HIP (else CUDA), bit 1 unset; then the value and,
    # after a NUL, the physical UUIDs one per line (default: four built into the target).
    write("visible_devices", "indices", b"\x00" + b"0,2")
    write("visible_devices", "blanks_hip", b"\x01" + b" 3 , 1,\t0 ")
    write("visible_devices", "uuid_prefix", b"\x00" + b"gpu-c0ffee00-0000-4000-8000-000000000001,1")
    write("visible_devices", "ambiguous_prefix", b"\x00" + b"GPU-5a1f")
    write("visible_devices", "stops_at_minus_one", b"\x00" + b"1,-1,0")
    write("visible_devices", "repeat", b"\x00" + b"1,1")
    write("visible_devices", "mig", b"\x00" + b"MIG-5a1f3c2e-9b7d-4e61-a0c3-2f8e1d6b7a90")
    write("visible_devices", "empty_entry", b"\x00" + b"0,,1")
    write("visible_devices", "unset", b"\x02")
    write("visible_devices", "own_uuids",
          b"\x00" + b"GPU-b,+0" + b"\0" + b"GPU-a1\nGPU-b2\nGPU-b3x\n\nGPU-c")
    write("visible_devices", "huge_index", b"\x00" + b"99999999999999999999999,0")


def simulated_gpus():
    # The value; after a NUL, CUDA_VISIBLE_DEVICES.
    write("simulated_gpus", "h200", "4:h200")
    write("simulated_gpus", "count_only", "2")
    write("simulated_gpus", "upper_model", "8:A100")
    write("simulated_gpus", "max_count", "1024:v100")
    write("simulated_gpus", "zero", "0")
    write("simulated_gpus", "empty_model", "3:")
    write("simulated_gpus", "unknown_model", "1:h900")
    write("simulated_gpus", "with_visible", b"4:h100\x003,1")
    write("simulated_gpus", "visible_uuid_prefix", b"2:p100\x00GPU-")
    write("simulated_gpus", "visible_bad", b"2\x000,x")
    # A third value: ZEUSD_HOST_PORT.
    write("simulated_gpus", "zeusd_tcp", b"2:a40\x00\x00127.0.0.1:4938")
    write("simulated_gpus", "zeusd_ipv6", b"1\x000\x00[::1]:4938")
    write("simulated_gpus", "zeusd_bad_port", b"1\x00\x00localhost:65536")


if __name__ == "__main__":
    http_request()
    bso_wire()
    zeusd_query()
    jwt()
    prometheus_labels()
    trace_csv()
    arrivals_csv()
    plo_profile()
    monitor_log()
    report_timeline()
    visible_devices()
    simulated_gpus()
