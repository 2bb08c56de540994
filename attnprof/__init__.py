"""attnprof: capture, analyse and render PyTorch profiles of attention, stage by stage."""


def display(record, against=None, **options):
    """The site's pieces for a capture inline in Jupyter (see attnprof.site.report.display)."""
    from .site.report import display as show
    return show(record, against, **options)
