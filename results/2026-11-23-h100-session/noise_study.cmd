env OUT=/tmp/session_work/noise BUNDLE_DIR=/work/main/bundle bash scripts/noise_study.sh
