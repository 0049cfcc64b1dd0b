# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
# Sourced by build-deb.sh and build-rpm.sh: the one way a package build copies
# the source tree.
#
# pg_stage_tree SRC DEST: copies the work tree SRC into the existing directory
# DEST as it is on disk, committed or not: in a git checkout the files git
# tracks or would track (untracked but not ignored) that exist; elsewhere every
# file except build*/ and .git. Uses a scratch list DEST.files, removed after.
pg_stage_tree() {
    _pg_src=$1 _pg_dest=$2
    if git -C "$_pg_src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$_pg_src" && git ls-files --cached --others --exclude-standard |
            while IFS= read -r f; do
                if [ -f "$f" ] || [ -L "$f" ]; then printf '%s\n' "$f"; fi
            done) >"$_pg_dest.files"
        tar -C "$_pg_src" -cf - -T "$_pg_dest.files" | tar -C "$_pg_dest" -xf -
        rm -f "$_pg_dest.files"
    else
        tar -C "$_pg_src" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$_pg_dest" -xf -
    fi
}

# pg_project_version SRC: the version in SRC/CMakeLists.txt's project(), the one source of it.
pg_project_version() {
    sed -n 's/^project(pullgate VERSION \([0-9][0-9.]*\) .*/\1/p' "$1/CMakeLists.txt" | head -n 1
}
