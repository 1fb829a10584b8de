"""The LLM judge: the ``llm_eval`` evaluator (:mod:`.evaluator`), the judge it asks
(:mod:`.judge`: prompt, strict answers, samples, retries, cache) through a back end
(:mod:`.backend`; Anthropic's Messages API and OpenAI's Chat Completions API built in), and ``atp judge calibrate``
(:mod:`.calibrate`, :mod:`.agreement`), which measures how well the judge agrees with people.

Nothing here is imported until an ``llm_eval`` assertion runs or ``atp judge`` is called; the
``anthropic`` SDK (extra ``atp-evaluators[judge]``) only when the Anthropic back end asks, the
``openai`` SDK (extra ``atp-evaluators[judge-openai]``) only when the OpenAI one does.
"""
