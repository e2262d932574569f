# Shared by the polyglot build scripts (source it): pinned toolchain versions, where the
# toolchains are installed, and small helpers. Everything installs under
# target/polyglot/tools/ (ignored by git) except Debian's clang packages.

# The versions the committed fixtures were built with. Change one, rebuild the fixtures
# (scripts/polyglot/fixtures.sh) and commit them together.
CLANG_VERSION=19                 # Debian bookworm: clang-19 lld-19 libclang-rt-19-dev-wasm32 wasi-libc
WIT_BINDGEN_VERSION=0.63.0       # crates.io wit-bindgen-cli (C bindings)
WASM_TOOLS_VERSION=1.263.0       # crates.io wasm-tools (component new / embed)
ZIG_VERSION=0.15.2               # PyPI ziglang
COMPONENTIZE_PY_VERSION=0.25.1   # PyPI componentize-py
# JavaScript: @bytecodealliance/componentize-js, pinned with its dependencies in
# scripts/polyglot/js-toolchain/package-lock.json.

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TOOLS="$ROOT/target/polyglot/tools"
WIT="$ROOT/wit"
mkdir -p "$TOOLS"

say() { echo "==> $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

# The cargo-installed tools (wit-bindgen, wasm-tools) at their pinned versions.
cargo_tool() {
    local crate=$1 version=$2 bin=$3
    if [[ ! -x "$TOOLS/bin/$bin" ]] || ! "$TOOLS/bin/$bin" --version | grep -q " $version"; then
        say "installing $crate $version (cargo install; a few minutes)"
        # The project's target dir settings are for the workspace, not for this.
        env -u CARGO_TARGET_DIR cargo install --quiet --locked --root "$TOOLS" "$crate" --version "$version"
    fi
}
wit_bindgen() { cargo_tool wit-bindgen-cli "$WIT_BINDGEN_VERSION" wit-bindgen; "$TOOLS/bin/wit-bindgen" "$@"; }
wasm_tools() { cargo_tool wasm-tools "$WASM_TOOLS_VERSION" wasm-tools; "$TOOLS/bin/wasm-tools" "$@"; }

# A Python virtual environment with the pinned PyPI packages given as arguments.
python_venv() {
    local venv="$TOOLS/venv"
    if [[ ! -x "$venv/bin/python" ]]; then
        say "creating $venv"
        python3 -m venv "$venv"
    fi
    local missing=()
    for spec in "$@"; do
        "$venv/bin/python" -m pip show "${spec%%==*}" 2>/dev/null | grep -qx "Version: ${spec##*==}" || missing+=("$spec")
    done
    if ((${#missing[@]})); then
        say "pip install ${missing[*]}"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
    fi
    echo "$venv"
}

# Apt packages (as root, or with sudo).
apt_install() {
    local missing=()
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    ((${#missing[@]})) || return 0
    local sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    say "apt-get install ${missing[*]}"
    $sudo apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
}

# Output directory: $1 or target/polyglot/<language>.
out_dir() {
    local dir=${1:-"$ROOT/target/polyglot/$2"}
    mkdir -p "$dir"
    cd "$dir" && pwd
}

# `wit-bindgen c` output for the contract in $1: udf_plugin.{h,c} and the component type.
generate_c_bindings() {
    local dir=$1
    rm -rf "$dir" && mkdir -p "$dir"
    wit_bindgen c "$WIT" --world udf-plugin --out-dir "$dir" >/dev/null
}

# Compile C sources with the C SDK and the bindings in $ROOT/target/polyglot/stage/c-bindings
# into the core module $1 (a reactor: no main, nothing from WASI needed).
compile_c() {
    local core=$1
    shift
    local gen="$ROOT/target/polyglot/stage/c-bindings"
    "clang-$CLANG_VERSION" --target=wasm32-wasi --sysroot=/usr -O2 -msimd128 -mexec-model=reactor \
        -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter -ffile-prefix-map="$ROOT"=. \
        -I "$ROOT/guest-sdk/c" -I "$gen" -Wl,--strip-debug \
        "$@" "$ROOT"/guest-sdk/c/*.c "$gen/udf_plugin.c" "$gen/udf_plugin_component_type.o" -o "$core"
}

# Whether $1 exists and is newer than every file under the other arguments.
up_to_date() {
    local out=$1
    shift
    [[ -f $out ]] && [[ -z $(find "$@" -newer "$out" -print -quit) ]]
}
