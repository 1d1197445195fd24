"""The baseline a text classifier must beat: TF-IDF features and logistic regression.

    x = tf-idf(text)                     word unigrams and bigrams, tf replaced by 1 + log tf,
                                         idf = ln((1 + n) / (1 + df)) + 1, each row L2-normalized
    p(class | text) = softmax(W x + b)   multinomial logistic regression, L2 penalty 1 / C

scikit-learn's ``TfidfVectorizer`` and ``LogisticRegression``. Classes are weighted by
inverse frequency (``class_weight="balanced"``), as the transformers' batches are balanced,
so that macro-F1 compares like with like. Words seen in fewer than two training texts are
dropped. A bag of words knows nothing of order, but it reads every word of every training
passage: on a small task it is often hard to beat.

>>> model = tfidf_baseline(["a merry jest", "merry wedding", "death and blood", "blood grave"], [0, 0, 1, 1])
>>> model.predict(["a merry song", "blood everywhere"]).tolist()
[0, 1]
"""

from __future__ import annotations

from collections.abc import Sequence

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline


def tfidf_baseline(texts: Sequence[str], labels: Sequence[int], c: float = 10.0) -> Pipeline:
    """A fitted TF-IDF + logistic regression pipeline (``predict``, ``predict_proba``)."""
    if len(texts) == 0 or len(texts) != len(labels):
        raise ValueError(
            f"need one label per text and at least one: {len(texts)} texts, {len(labels)} labels"
        )
    min_df = 2 if len(texts) > 100 else 1  # tiny sets (tests, examples) keep every word
    vectorizer = TfidfVectorizer(sublinear_tf=True, min_df=min_df, ngram_range=(1, 2))
    classifier = LogisticRegression(C=c, class_weight="balanced", max_iter=2000)
    return make_pipeline(vectorizer, classifier).fit(list(texts), list(labels))
