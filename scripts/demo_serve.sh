#!/usr/bin/env bash
# The end of `make demo`: serve the pushed model with `tfxp serve` (the TF Serving-compatible stand-in;
# production uses TensorFlow Serving), classify a few eval images over gRPC and REST, stop the server.
# Usage: scripts/demo_serve.sh TFXP DATA_DIR MODEL_BASE [GRPC_PORT] [REST_PORT]
set -euo pipefail
tfxp=$1 data=$2 model_base=$3 grpc_port=${4:-8500} rest_port=${5:-8501}

if [ ! -d "$model_base" ] || [ -z "$(ls -A "$model_base" 2>/dev/null)" ]; then
  echo "demo: no pushed model under $model_base (the model was not blessed?); skipping the serving part" >&2
  exit 0
fi
log=$(mktemp -t tfxp-serve-XXXX.log)
"$tfxp" serve --model-base "$model_base" --host 127.0.0.1 --grpc-port "$grpc_port" --rest-port "$rest_port" >"$log" 2>&1 &
server=$!
trap 'kill -INT $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
echo "== tfxp serve on 127.0.0.1:$grpc_port (gRPC) and :$rest_port (REST), log: $log"
echo "== gRPC Predict"
"$tfxp" predict --examples "$data" --count 3 --grpc "127.0.0.1:$grpc_port" --wait 120
echo "== REST :predict"
"$tfxp" predict --examples "$data" --count 3 --rest "http://127.0.0.1:$rest_port" --wait 30
echo "== stopping the server"
