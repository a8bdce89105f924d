# Sourced by the bench/*_ab.sh scripts (from the repository's root): `worktree_at COMMIT` checks
# COMMIT out in a worktree of its own under a fresh directory ($base; a process run with
# PYTHONPATH=$base imports that commit's specd ahead of the editable install), with its own build
# of the kernels where its C sources differ from this checkout's, and removes it at exit.
worktree_at() {
  base=$(mktemp -d)
  trap '.venv/bin/specd stop > /dev/null 2>&1; git worktree remove --force "$base/specd" > /dev/null 2>&1; rm -rf "$base"' EXIT
  git worktree add --detach -q "$base/specd" "$1"
  if git diff --quiet "$1" -- decoding/kernels setup.py; then
    cp decoding/_kernels*.so "$base/specd/decoding/"
  else
    (cd "$base/specd" && "$OLDPWD/.venv/bin/python" setup.py -q build_ext --inplace > /dev/null)
  fi
}
