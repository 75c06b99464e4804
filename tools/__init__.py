"""What ``tasks.py`` runs, as modules of this package (``python -m tools.NAME`` from the repository root).

- :mod:`tools.notebook_params`   -- where the course's notebooks are, and the smoke setting CI runs them in.
- :mod:`tools.notebook_metadata` -- the run metadata the course command strips, wall times, README's sentence.
- :mod:`tools.run_notebooks`     -- execute the notebooks with papermill (``tasks.py course``).
- :mod:`tools.make_exercises`    -- the exercise notebooks, made from their solutions with nbgrader.
- :mod:`tools.stage_nbval`       -- the notebooks nbval runs, in the smoke setting (``tasks.py test``).
- :mod:`tools.nbval_conftest`    -- copied beside them: nbval's output wait, lengthened.
- :mod:`tools.fake_data`         -- small generated Fashion-MNIST IDX files, where the real ones are missing.
- :mod:`tools.links`             -- Colab badges and install cells pointed at the repository URL.
- :mod:`tools.stress`            -- the tests that race the machine, under load (``tasks.py stress``).
- :mod:`tools.site`              -- the course as a static website, built offline and checked (``tasks.py site``).
- :mod:`tools.site_pages`        -- the website's pages: course order, reading and running times, the landing page.
"""
