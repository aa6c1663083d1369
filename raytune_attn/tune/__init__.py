"""The tuner (`pip install 'raytune-attn[tune]'`): search spaces and searchers, the Ray Tune sweep, measurement,
results, MLflow tracking, reports and the command line. The inference core (the package above) never imports it."""
