env OUT=/tmp/session_work/sweep BUNDLE_DIR=/work/main/bundle bash scripts/serve_sweep.sh
