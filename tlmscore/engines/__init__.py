"""Engines that run the pipeline's stages over many machines (`ray`: Ray Data, extra `tlmscore[ray]`)."""

__all__: list[str] = []
