#!/usr/bin/env bash
# Stack commands through `cairn serve` against the in-process engine, same binary, same run: a 3-file Local stack
# created, updated to 2 files (one deleted) and deleted, each timed from spawning the command to its exit.
# usage: scripts/bench-stack-server.sh CAIRN_BIN server|local [RUNS]   (prints create, update and delete in ms per run)
set -euo pipefail
BIN=$1; MODE=$2; RUNS=${3:-5}
W=$(mktemp -d); cd "$W"; mkdir files
cat > main.json <<'J'
{"$schema":"https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#","languageVersion":"2.0","contentVersion":"1.0.0.0",
 "parameters":{"n":{"type":"int","defaultValue":3}},
 "extensions":{"local":{"name":"Local","version":"1.0.0"}},
 "resources":{"f":{"copy":{"name":"f","count":"[parameters('n')]"},"extension":"local","type":"File","apiVersion":"1.0.0","properties":{"path":"[format('f{0}.txt', copyIndex())]","content":"x"}}}}
J
echo "{\"parameters\":{},\"extensionConfigs\":{\"local\":{\"rootDirectory\":{\"value\":\"$W/files\"}}}}" > p.json
export CAIRN_HOME=$W/home
S=()
if [ "$MODE" = server ]; then
  PORT=$((20000 + RANDOM % 20000))
  "$BIN" serve --listen 127.0.0.1:$PORT --data-dir "$W/data" --local-root "$W" >serve.log 2>&1 &
  SP=$!
  for i in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/subscriptions?api-version=2022-12-01" && break; sleep 0.1; done
  S=(--server http://127.0.0.1:$PORT)
fi
"$BIN" group create -n rg -l local "${S[@]}" >/dev/null
t() { local s=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; }; echo $(( ($(date +%s%N)-s)/1000000 )); }
for r in $(seq $RUNS); do
  c=$(t "$BIN" stack group create -n st -g rg -f main.json -p p.json --aou deleteAll --yes "${S[@]}")
  u=$(t "$BIN" stack group create -n st -g rg -f main.json -p p.json n=2 --aou deleteAll --yes "${S[@]}")
  d=$(t "$BIN" stack group delete -n st -g rg --aou deleteAll --yes "${S[@]}")
  echo "$c $u $d"
done
if [ "$MODE" = server ]; then kill "$SP"; fi
rm -rf "$W"
