"""Sentences in the chapters that state what the captures show are checked here against the committed
captures, so a recapture that changes the picture fails the tests instead of leaving the prose wrong."""
from attnprof.analysis import kernel_names
from attnprof.model import store
from attnprof.analysis import records

summary = records.load_summary


def check(name, *args):
    """A claim on the committed records (raises FalseStatement where they contradict it)."""
    from attnprof.site import registry
    from attnprof.site.build import Build
    from attnprof.site.claims import core as statements
    registry.load()
    return statements.check(Build(store.CAPTURES, problems={}), name, *args)


def kernels(stage):
    return [op for op in summary(stage)["ops"] if op["kind"] == "kernel"]


def test_inplace_masking_kernel_is_the_slowest_op():  # inplace.md, naive.md
    for stage in ("naive", "inplace"):
        slowest = max(summary(stage)["ops"], key=lambda op: op["duration_us"])
        assert "masked_fill" in slowest["name"], stage


def test_elementwise_passes_cost_more_than_both_matmuls():  # claims.md
    ops = summary("inplace")["ops"]
    matmuls = sum(op["duration_us"] for op in ops if kernel_names.explain(op["name"])["library"].startswith("cuBLAS"))
    others = sum(op["duration_us"] for op in ops if op["kind"] == "kernel"
                 and not kernel_names.explain(op["name"])["library"].startswith("cuBLAS"))
    assert others > matmuls


def test_cudnn_is_the_fastest_backend_and_auto_picks_it():  # auto.md, at-a-glance.md
    assert check("cudnn-fastest")  # the claim holds the ranking
    auto = summary("auto")
    assert auto["sdpa_choice"] == "cudnn" and kernel_names.fingerprint(op["name"] for op in auto["ops"]) == "cudnn"


def test_hopper_kernels_as_described():  # naive.md, efficient.md, flash.md, cudnn.md, math.md
    assert all(k["name"].startswith("nvjet_sm90") for k in kernels("naive") if "nvjet" in k["name"])
    assert any(k["launch"] == "cuLaunchKernelEx" for k in kernels("naive"))
    assert kernel_names.explain(kernels("efficient")[0]["name"])["arch"] == "sm_80"
    cudnn = kernels("cudnn")[0]
    assert "wgmma" in cudnn["name"] and cudnn["launch"] == "cuLaunchKernelEx" and cudnn["grid"] == [132, 1, 1]
    flash = kernels("flash")[0]
    assert flash["registers"] == 255 and flash["block"] == [128, 1, 1]
    math_gemms = [k for k in kernels("math") if "gemm" in k["name"]]
    assert len(math_gemms) == 2 and all("ffma" in k["name"] and "sm80" in k["name"] for k in math_gemms)
    assert [k for k in kernels("math")][:3] and all("direct_copy" in k["name"] for k in kernels("math")[:3])


def test_sage_quantises_before_attending():  # fused.md
    ops = [op["name"] for op in summary("sage")["ops"]]
    assert sum("quant_per_block_int8" in n for n in ops) == 2 and ops[-1] == "_attn_fwd"
    assert summary("sage")["rel_err"] > summary("cudnn")["rel_err"]


def test_layout_work_on_the_cpu_side():  # efficient.md, cudnn.md
    def direct(stage, name):
        return [c for c in summary(stage)["cpu_ops"] if c["name"] == name]
    transposes = [c["start_us"] for c in summary("efficient")["cpu_ops"] if c["name"] == "aten::transpose"]
    kernel_call = direct("efficient", "aten::_efficient_attention_forward")[0]["start_us"]
    assert sum(t < kernel_call for t in transposes) == 3 and sum(t > kernel_call for t in transposes) == 1
    assert not direct("cudnn", "aten::transpose")
    assert [op["kind"] for op in summary("cudnn")["ops"]] == ["memset", "kernel"]


def test_efficient_runs_the_posts_a100_kernel():  # efficient.md
    from attnprof.analysis import hardware
    assert kernel_names.label(kernels("efficient")[0]["name"]) == hardware.KERNELS["efficient"]


def test_fa4_beats_cudnn_as_the_roofline_chapter_says():  # roofline.md, fused.md, scaling.md
    fa4, cudnn = (summary(f"{s}-1x16x8192x128") for s in ("fa4", "cudnn"))
    (k,), ck = kernels("fa4-1x16x8192x128"), max(kernels("cudnn-1x16x8192x128"), key=lambda op: op["duration_us"])
    assert fa4["ops_per_forward"] == 1 and cudnn["ops_per_forward"] == 2  # cuDNN adds a Memset
    assert k["duration_us"] < ck["duration_us"]
    assert k["block"] == ck["block"] == [384, 1, 1] and k["registers"] == ck["registers"]
    assert ck["grid"] == [cudnn["sm_count"], 1, 1] and k["grid"] == [16 * 8192 // 128, 1, 1]  # persistent vs per tile
    assert k["shared_memory"] < ck["shared_memory"]
    assert kernel_names.explain(k["name"])["library"] == "FlashAttention-4 (CuTe DSL)"
    assert check("layout-gap", "fa4").text.startswith("In both, FlashAttention-4 is the fastest forward")
    small = summary("fa4")
    assert small["cpu_forward_us"] > small["forward_device_us"]  # scaling.md: launch-bound at the post's shape


# ---- statements of the new explanations, held to the captures and the hardware run ----------------

def test_math_gap_is_smaller_here_than_on_the_a100_and_math_leans_on_fp32_matmuls():  # math.md, at-a-glance.md
    from attnprof.site.pieces.captures import gemm_us
    assert check("math-gap")  # the gap smaller here than on the A100
    # "only ... in its bf16 matmuls": more of the math forward is matmul, in time and in share
    assert gemm_us(summary("math")) > gemm_us(summary("inplace"))
    assert gemm_us(summary("math")) / summary("math")["forward_device_us"] > \
        gemm_us(summary("inplace")) / summary("inplace")["forward_device_us"]
    assert gemm_us(summary("math")) < summary("math")["forward_device_us"] - gemm_us(summary("math"))  # "more still"
    gemms = [op for op in summary("math")["ops"] if kernel_names.explain(op["name"])["library"].startswith("cuBLAS")]
    assert len(gemms) == 2 and all(kernel_names.explain(op["name"])["math_unit"] == "cuda cores" for op in gemms)
    longest = sorted(summary("math")["ops"], key=lambda op: -op["duration_us"])[:2]
    assert {op["name"] for op in longest} == {op["name"] for op in gemms}  # "the two longest ops"


def test_ratios_follow_what_bounds_each_rung():  # at-a-glance.md, math.md, inplace.md: peak to peak
    for name in ("a100-inplace", "a100-math", "a100-fused-ampere", "a100-cudnn"):  # each the claim's own check
        assert check(name)


def test_the_post_found_cudnn_the_most_expensive_on_the_cpu_and_our_ranking_is_computed():  # cudnn.md, at-a-glance.md
    from attnprof.analysis import hardware
    fused = ("efficient", "flash", "cudnn")
    assert max(fused, key=lambda s: hardware.FIGURES[s]["cpu_us"]) == "cudnn"
    for page in ("cudnn.md", "at-a-glance.md"):  # where cuDNN ranks here is the timing run's, never typed
        text = (store.ROOT / "docs" / page).read_text()
        assert "say cpu-rank cudnn flash efficient" in text and "no longer the most expensive" not in text


def test_the_nvjet_kernels_are_persistent():  # naive.md
    sms = summary("naive")["sm_count"]
    for op in summary("naive")["ops"]:
        if op["name"].startswith("nvjet"):
            blocks = op["grid"][0] * op["grid"][1] * op["grid"][2]
            assert blocks == sms and op["block"] == [384, 1, 1] and op["launch"] == "cuLaunchKernelEx"
    assert [op["name"].rsplit("_", 1)[-1] for op in summary("naive")["ops"] if op["name"].startswith("nvjet")] == \
        ["TNT", "NNT"]


# ---- words: titles, boxes and promises ---------------------------------------------------------------

def nav():
    import yaml
    config = yaml.load((store.ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # tags left as text
    sections = {}
    for entry in config["nav"]:
        (label, target), = entry.items()
        sections[label] = target if isinstance(target, list) else [{label: target}]
    return sections


def test_nav_labels_are_the_chapter_titles():
    from attnprof.model.stages import STAGES
    for section, entries in nav().items():
        for entry in entries:
            if isinstance(entry, str):  # no label: MkDocs takes the page's own title
                continue
            (label, path), = entry.items()
            if path == "index.md":
                continue
            if path.startswith("notebooks/"):  # a notebook's page: the notebook's title is its stage's
                title = STAGES[path.split("/")[-1].removesuffix(".md")].title
            else:
                title = next(l[2:] for l in (store.ROOT / "docs" / path).read_text().splitlines() if l.startswith("# "))
            assert label == title, (label, title)


def test_every_ladder_chapter_and_every_chapter_beyond_the_post_asks_a_titled_guess_first():
    """An open box (`!!!`): a closed one is a bar on a phone, and the guess is what the chapter answers; it comes
    before the chapter's lesson (test_phone.py holds where each sits on a phone)."""
    import re
    chapters = [next(iter(e.values())) for section in ("The ladder", "Beyond the post") for e in nav()[section]]
    for path in chapters:
        if path == "at-a-glance.md":  # the summary of the ladder, not a rung
            continue
        text = (store.ROOT / "docs" / path).read_text()
        boxes = re.findall(r'^(\?\?\?\+?|!!!) question "(.*)"', text, re.M)
        assert boxes and all(kind == "!!!" and b.startswith("Guess first: ") and b.endswith("?") for kind, b in boxes), (path, boxes)
        assert text.index('question "Guess first') < text.index('!!! lesson "The lesson"'), path


def test_every_profiled_stage_chapter_links_its_notebook():  # the home page's promise
    from attnprof.model.stages import ladder
    for stage in ladder():
        assert f"(notebooks/{stage}.md)" in (store.ROOT / "docs" / f"{stage}.md").read_text(), stage


def test_no_process_talk_in_the_chapters():
    import re
    for page in (store.ROOT / "docs").glob("*.md"):
        text = page.read_text()
        for pattern in (r"\b64 MiB\b", r"target was", r"\btook 0 s\b", r"transfer", r"\bissue\b"):
            assert not re.search(pattern, text), (page.name, pattern)
