# Sourced by the scripts that put the in-process model beside llama-server: builds
# llama-server on first use (tools/real-models/install.sh) and sets `model` to the
# SmolLM2-135M-Instruct GGUF that setup.sh fetched, or stops saying how to fetch it.
source tools/real-models/install.sh
install_llama_server
model="${SAP_LOCAL_MODEL_CACHE:-$HOME/.cache/sap-local-model}/SmolLM2-135M-Instruct.gguf"
[ -f "$model" ] || { echo "no model at $model: run tools/local-model/setup.sh" >&2; exit 1; }
