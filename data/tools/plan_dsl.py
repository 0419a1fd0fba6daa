"""The capture plan's small vocabulary: P(case, basic, local), B(...) and L(...)."""

# --------------------------------------------------------------------------------------------
# The plan. Per case: basic_search (no folder selection) and local_search (folder selection).
#   ret:  [(anchor, score), ...] in rank order      refs: cited anchors (or ('FAKE', path, heading))
#   lat:  basic (retrieval, generation, overhead); local (folder_selection, retrieval, generation,
#         overhead); total = sum of stages + overhead
#   mode/folders: local folder_mode and selected_folders; abst: abstained; status/error.
# --------------------------------------------------------------------------------------------
PLAN = {}
NO_ANSWER = "I could not find this in the notes."
ERR_502 = "HTTP 502 Bad Gateway from /debug/query"


def P(case_id, basic, local):
    assert case_id not in PLAN, case_id
    PLAN[case_id] = {"basic_search": basic, "local_search": local}


def B(ret, ans, refs, lat, abst=False, status="ok", error=None):
    return dict(
        ret=ret,
        ans=ans,
        refs=refs,
        lat=(0,) + tuple(lat),
        abst=abst,
        status=status,
        error=error,
        mode="off",
        folders=[],
    )


def L(mode, folders, ret, ans, refs, lat, abst=False, status="ok", error=None):
    return dict(
        ret=ret, ans=ans, refs=refs, lat=tuple(lat), abst=abst, status=status, error=error, mode=mode, folders=folders
    )
