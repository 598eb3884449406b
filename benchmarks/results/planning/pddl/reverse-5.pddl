(define (problem reverse-5) (:domain blocks)
  (:objects b1 b2 b3 b4 b5 - block)
  (:init (handempty) (clear b1) (ontable b5) (on b1 b2) (on b2 b3) (on b3 b4) (on b4 b5))
  (:goal (and (on b2 b1) (on b3 b2) (on b4 b3) (on b5 b4))))
