"""The results model that survey, compare, matrix, report and stacks share: the survey's
words (:mod:`.model`), verdicts (:mod:`.verdicts`), failure groups (:mod:`.groups`), the census
(:mod:`.census`), comparability (:mod:`.comparable`) and the results document (:mod:`.document`).
Pure standard library; it imports nothing of any command."""
