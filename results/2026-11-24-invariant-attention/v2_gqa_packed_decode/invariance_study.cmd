env OUT=/tmp/inv_work/study BIN=/work/main/bundle/roseinfer MODEL=llama-1b REQUESTS=120 bash scripts/invariance_study.sh
