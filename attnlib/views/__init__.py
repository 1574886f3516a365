"""Views of attention: matplotlib figures (plots), kernel-free explorers (widgets), offline BertViz views (bertviz)."""
